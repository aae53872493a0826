from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

admin.site.site_header = "Rollback console"
admin.site.site_title = "Rollback console"
admin.site.index_title = "Users, sessions, branches and checkpoints"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("accounts.urls")),
    path("api/v1/", include("rollback_site.api_urls")),
    path("chat/", include("sessions_app.urls")),
    path("", RedirectView.as_view(pattern_name="chat:home", permanent=False)),
]
