from __future__ import annotations

from django.urls import path

from web.pages import accounts as views
from web.pages import mcp, sso, telegram, usage

app_name = "accounts"

urlpatterns = [
    path("signup/", views.signup, name="signup"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", sso.SignOut.as_view(), name="logout"),
    path("sso/", sso.SsoStart.as_view(), name="sso_start"),
    path("sso/callback/", sso.SsoCallback.as_view(), name="sso_callback"),
    path("password/", views.PasswordChangeView.as_view(), name="password_change"),
    path("profile/", views.profile, name="profile"),
    path("usage/", usage.usage_page, name="usage"),
    path("profile/api-keys/", views.apikey_create_view, name="apikey_create"),
    path("profile/api-keys/<int:key_id>/revoke/", views.apikey_revoke_view, name="apikey_revoke"),
    path("profile/mcp/<str:name>/", mcp.credentials_save, name="mcp_credentials"),
    path("profile/mcp/<str:name>/remove/", mcp.credentials_remove, name="mcp_credentials_remove"),
    path("profile/telegram/link/", views.telegram_link_view, name="telegram_link"),
    path(
        "profile/telegram/<int:chat_pk>/unlink/",
        telegram.telegram_unlink_view,
        name="telegram_unlink",
    ),
]
