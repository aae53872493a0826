from __future__ import annotations

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from web import telegram_webhook
from web.admin import login as admin_login
from web.pages import errors, health, shared


class FaviconView(RedirectView):
    """/favicon.ico: the app's icon (static/rollback/icon.svg, by its hashed name)."""

    permanent = False

    def get_redirect_url(self, *args: object, **kwargs: object) -> str:
        return static("rollback/icon.svg")


admin.site.site_header = "Rollback console"
admin.site.site_title = "Rollback console"
admin.site.index_title = "Users, sessions, branches and checkpoints"

handler400 = errors.bad_request
handler404 = errors.not_found
handler500 = errors.server_error

urlpatterns = [
    # The admin's login under the sign-in limits' 429 (the limits themselves hold for any login).
    path("admin/login/", admin_login.login),
    path("admin/", admin.site.urls),
    path("accounts/", include("web.pages.account_urls")),
    path("api/v1/", include("web.api.urls")),
    path("chat/", include("web.pages.chat_urls")),
    path("memories/", include("web.pages.memory_urls")),
    path("shares/", include("web.pages.share_urls")),
    # A share link's public page: anyone with the address, no cookie (web.pages.shared).
    path("s/<str:token>/", shared.shared, name="shared"),
    # For load balancers and monitoring: public, JSON, 200 or 503 (the contract's GET /healthz).
    path("healthz", health.healthz, name="healthz"),
    # Telegram's updates (the contract's Telegram part): checked by the secret header.
    path(
        "integrations/telegram/webhook/",
        telegram_webhook.webhook,
        name="telegram_webhook",
    ),
    # What a browser asks for when a page names no icon (the API's JSON, a file download).
    path("favicon.ico", FaviconView.as_view(), name="favicon"),
    path("", RedirectView.as_view(pattern_name="chat:home", permanent=False)),
]
