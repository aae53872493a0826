from __future__ import annotations

from django.urls import path

from web.pages import approvals as approval_views
from web.pages import branch_read as read_views
from web.pages import chat as views
from web.pages import checkpoints as checkpoint_views
from web.pages import compare as compare_views
from web.pages import feedback as feedback_views
from web.pages import files as file_views
from web.pages import governance as governance_views
from web.pages import mcp as mcp_views
from web.pages import session_list as list_views
from web.pages import session_settings as settings_views
from web.pages import tool_images as tool_image_views

app_name = "chat"

urlpatterns = [
    path("", list_views.home, name="home"),
    path("new/", list_views.session_new, name="new"),
    path("import/", list_views.import_session, name="import"),
    path("imports/<int:pk>/", list_views.import_job, name="import_job"),
    path("sessions/", list_views.session_list, name="session_list"),
    path("<int:pk>/", views.session_page, name="session"),
    path("<int:pk>/rename/", list_views.session_rename, name="rename"),
    path("<int:pk>/archive/", list_views.session_archive, name="archive"),
    path("<int:pk>/unarchive/", list_views.session_unarchive, name="unarchive"),
    path("<int:pk>/delete/", list_views.session_remove, name="delete"),
    path("<int:pk>/settings/", settings_views.session_settings, name="session_settings"),
    path("<int:pk>/tools/", mcp_views.session_tools, name="session_tools"),
    path(
        "<int:pk>/tools/<str:name>/credentials/",
        mcp_views.session_tools_credentials,
        name="session_tools_credentials",
    ),
    path("<int:pk>/pin/", list_views.session_pin, name="pin"),
    path("<int:pk>/unpin/", list_views.session_unpin, name="unpin"),
    path("<int:pk>/export/", list_views.export, name="export"),
    path("<int:pk>/messages/", views.conversation_page, name="earlier"),
    path("<int:pk>/messages/later/", views.conversation_later, name="later"),
    path("<int:pk>/search/", views.conversation_search, name="search"),
    path("<int:pk>/refresh/", views.conversation_refresh, name="refresh"),
    path("<int:pk>/send/", views.send, name="send"),
    path("<int:pk>/turns/<int:turn_id>/retry/", views.retry, name="retry"),
    path("<int:pk>/turns/<int:turn_id>/cancel/", views.cancel, name="cancel"),
    path("<int:pk>/turns/<int:turn_id>/approve/", approval_views.approve, name="approve"),
    path("<int:pk>/messages/<int:message_id>/edit/", views.edit_form, name="edit_form"),
    path("<int:pk>/messages/<int:message_id>/resend/", views.edit, name="edit"),
    path("<int:pk>/messages/<int:message_id>/regenerate/", views.regenerate, name="regenerate"),
    path("<int:pk>/messages/<int:message_id>/continue/", views.continue_reply, name="continue"),
    path(
        "<int:pk>/messages/<int:message_id>/feedback/",
        feedback_views.feedback,
        name="feedback",
    ),
    path("<int:pk>/messages/<int:message_id>/branch/", views.message_branch, name="message_branch"),
    path(
        "<int:pk>/messages/<int:message_id>/images/<int:index>/",
        tool_image_views.tool_image,
        name="tool_image",
    ),
    path("<int:pk>/branches/<int:branch_id>/", read_views.branch_read, name="branch_read"),
    path(
        "<int:pk>/branches/<int:branch_id>/continue/",
        read_views.branch_continue,
        name="branch_continue",
    ),
    path("<int:pk>/branches/<int:branch_id>/activate/", views.activate, name="activate"),
    path(
        "<int:pk>/branches/<int:branch_id>/rename/",
        views.branch_rename_view,
        name="branch_rename",
    ),
    path("<int:pk>/files/", file_views.files_panel, name="files_panel"),
    path("<int:pk>/files/tree/", file_views.files_tree, name="files_tree"),
    path("<int:pk>/files/upload/", file_views.files_upload, name="files_upload"),
    path("<int:pk>/files/view/<path:path>", file_views.file_view, name="file_view"),
    path("<int:pk>/files/download/<path:path>", file_views.file_download, name="file_download"),
    path("<int:pk>/files/image/<path:path>", file_views.file_image, name="file_image"),
    path("<int:pk>/files/delete/<path:path>", file_views.file_remove, name="file_delete"),
    path("<int:pk>/checkpoints/", checkpoint_views.save, name="checkpoint_save"),
    path("<int:pk>/checkpoints/list/", checkpoint_views.checkpoint_list, name="checkpoint_list"),
    path("<int:pk>/compare/", compare_views.compare, name="compare"),
    path("<int:pk>/compare/points/", compare_views.compare_points, name="compare_points"),
    path("checkpoints/<int:cp_id>/", checkpoint_views.detail, name="checkpoint_detail"),
    path("checkpoints/<int:cp_id>/delete/", checkpoint_views.delete, name="checkpoint_delete"),
    path("checkpoints/<int:cp_id>/restore/", checkpoint_views.restore, name="checkpoint_restore"),
    path(
        "checkpoints/<int:cp_id>/branch/", checkpoint_views.show_on_branch, name="checkpoint_branch"
    ),
    path(
        "<int:pk>/admin-notices/<int:notice_id>/dismiss/",
        governance_views.dismiss,
        name="admin_notice_dismiss",
    ),
]
