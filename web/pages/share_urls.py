from __future__ import annotations

from django.urls import path

from web.pages import shares as views

app_name = "shares"

urlpatterns = [
    path("branches/<int:branch_id>/", views.share_dialog, name="branch"),
    path("<int:share_id>/delete/", views.share_remove, name="delete"),
]
