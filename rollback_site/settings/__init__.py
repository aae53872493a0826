"""The Django settings (DJANGO_SETTINGS_MODULE=rollback_site.settings), driven by the environment
(see ../shared/api-contract.md and the README's configuration table).

Defaults need no configuration: a SQLite file under var/, the in-memory channel layer, Celery
tasks run in process, and the offline demo model. DATABASE_URL and REDIS_URL switch to
PostgreSQL and Redis. DJANGO_DEBUG=0 declares a production deployment (core.py).

Every variable is declared once, with its type, default and bounds, in env.py; a bad value stops
the start naming it. The settings are made from it in one module per concern, gathered here.
"""

from __future__ import annotations

import sys

# Each part is imported afresh, so importlib.reload(rollback_site.settings) reads the environment
# again, as the single module this package was did.
for _part in [name for name in sys.modules if name.startswith(f"{__name__}.")]:
    del sys.modules[_part]

from rollback_site.settings.agent import *  # noqa: E402, F403
from rollback_site.settings.api import *  # noqa: E402, F403
from rollback_site.settings.core import *  # noqa: E402, F403
from rollback_site.settings.integrations import *  # noqa: E402, F403
from rollback_site.settings.security import *  # noqa: E402, F403
from rollback_site.settings.stores import *  # noqa: E402, F403
from rollback_site.settings.workers import *  # noqa: E402, F403
