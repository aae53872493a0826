from __future__ import annotations

from django.contrib import admin
from django.urls import path
from django.views.generic import RedirectView

admin.site.site_header = "Rollback console"
admin.site.site_title = "Rollback console"
admin.site.index_title = "Users, sessions, branches and checkpoints"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
]
