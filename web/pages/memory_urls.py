from __future__ import annotations

from django.urls import path

from web.pages import memories as views

app_name = "memories"

urlpatterns = [
    path("", views.memory_list, name="list"),
    path("<int:pk>/edit/", views.memory_edit, name="edit"),
    path("<int:pk>/delete/", views.memory_delete_view, name="delete"),
]
