"""The REST API, /api/v1/ (see ../shared/api-contract.md)."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.urls import path, re_path
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.permissions import AllowAny

from core.api import JSONErrors
from web.api import accounts as accounts_api
from web.api import approvals as approvals_api
from web.api import branches as branches_api
from web.api import checkpoints as checkpoints_api
from web.api import compare as compare_api
from web.api import effects as effects_api
from web.api import files as files_api
from web.api import imports as imports_api
from web.api import mcp as mcp_api
from web.api import memories as memories_api
from web.api import messages as messages_api
from web.api import sessions as sessions_api
from web.api import shares as shares_api
from web.api import telegram as telegram_api
from web.api import turns as turns_api
from web.api import usage as usage_api

app_name = "api"


class SchemaView(JSONErrors, SpectacularAPIView):
    """The OpenAPI schema (YAML, or JSON with ?format=json); errors in JSON."""


class DocsView(JSONErrors, SpectacularSwaggerSplitView):
    """Swagger UI over the schema; errors in JSON."""


@csrf_exempt
def not_found(request: HttpRequest, *args: object, **kwargs: object) -> JsonResponse:
    """Any other address under /api/v1/ (an id that is not a number, say): JSON, like the rest."""
    return JsonResponse({"detail": "Not found."}, status=404)


urlpatterns = [
    path("sessions/", sessions_api.SessionList.as_view(), name="sessions"),
    path("sessions/import/", sessions_api.SessionImport.as_view(), name="session-import"),
    path("imports/<int:pk>/", imports_api.ImportJobDetail.as_view(), name="import"),
    path("sessions/<int:pk>/", sessions_api.SessionDetail.as_view(), name="session"),
    path("sessions/<int:pk>/messages/", sessions_api.SessionMessages.as_view(), name="messages"),
    path("sessions/<int:pk>/turns/", turns_api.SessionTurns.as_view(), name="turns"),
    path("sessions/<int:pk>/branches/", branches_api.SessionBranches.as_view(), name="branches"),
    path(
        "sessions/<int:pk>/checkpoints/",
        checkpoints_api.SessionCheckpoints.as_view(),
        name="checkpoints",
    ),
    path("sessions/<int:pk>/effects/", effects_api.SessionEffects.as_view(), name="effects"),
    path("sessions/<int:pk>/files/", files_api.SessionFiles.as_view(), name="files"),
    path("sessions/<int:pk>/files/<path:path>", files_api.SessionFile.as_view(), name="file"),
    path("sessions/<int:pk>/diff/", compare_api.SessionDiffView.as_view(), name="diff"),
    path("sessions/<int:pk>/export/", sessions_api.SessionExport.as_view(), name="export"),
    path(
        "messages/<int:pk>/feedback/",
        messages_api.MessageFeedback.as_view(),
        name="message-feedback",
    ),
    path("turns/<int:pk>/", turns_api.TurnDetail.as_view(), name="turn"),
    path("turns/<int:pk>/cancel/", turns_api.TurnCancel.as_view(), name="turn-cancel"),
    path("turns/<int:pk>/approve/", approvals_api.TurnApprove.as_view(), name="turn-approve"),
    path("branches/<int:pk>/", branches_api.BranchDetail.as_view(), name="branch"),
    path("branches/<int:pk>/activate/", branches_api.BranchActivate.as_view(), name="activate"),
    path("branches/<int:pk>/context/", branches_api.BranchContext.as_view(), name="context"),
    path("branches/<int:pk>/share/", shares_api.BranchShare.as_view(), name="branch-share"),
    path("shares/", shares_api.ShareList.as_view(), name="shares"),
    path("shares/<int:pk>/", shares_api.ShareDetail.as_view(), name="share"),
    path("checkpoints/<int:pk>/", checkpoints_api.CheckpointDetail.as_view(), name="checkpoint"),
    path(
        "checkpoints/<int:pk>/restore/",
        checkpoints_api.CheckpointRestore.as_view(),
        name="restore",
    ),
    path("chat/", turns_api.Chat.as_view(), name="chat"),
    path("memories/", memories_api.MemoryList.as_view(), name="memories"),
    path("memories/<int:pk>/", memories_api.MemoryDetail.as_view(), name="memory"),
    path("keys/", accounts_api.KeyList.as_view(), name="keys"),
    path("keys/<int:pk>/", accounts_api.KeyDetail.as_view(), name="key"),
    path("telegram/link/", telegram_api.TelegramLink.as_view(), name="telegram-link"),
    path("usage/", usage_api.UsageView.as_view(), name="usage"),
    path("mcp/servers/", mcp_api.McpServerList.as_view(), name="mcp-servers"),
    path(
        "mcp/servers/<str:name>/credentials/",
        mcp_api.McpCredentials.as_view(),
        name="mcp-credentials",
    ),
    path(
        "schema/",
        SchemaView.as_view(permission_classes=[AllowAny], authentication_classes=[]),
        name="schema",
    ),
    path(
        "docs/",
        # The Content Security Policy allows no inline script or style: the split view serves
        # Swagger UI's start-up script as a file of its own (docs/?script=), and our template
        # takes the page's inline style to static/rollback/swagger.css.
        DocsView.as_view(
            url_name="api:schema",
            template_name="api/swagger_ui.html",
            permission_classes=[AllowAny],
            authentication_classes=[],
        ),
        name="docs",
    ),
    re_path(r"", not_found),
]
