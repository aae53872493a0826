"""daphne's entry in INSTALLED_APPS, without daphne's own AppConfig.

The app is there for `manage.py runserver`, which it makes daphne's ASGI server (WebSockets
included). daphne's own AppConfig imports daphne.server at django.setup(), so that twisted's
reactor is installed before anything else imports twisted: every process (each management
command, each Celery worker) paid for twisted (~0.3 s of CPU) and served nothing. Nothing of
ours imports twisted but the processes that serve, and each of them imports daphne.server first
itself: rollback_site.serve, daphne's own command line, and the runserver command's module.

daphne's check that its app comes before django.contrib.staticfiles (daphne.E001) is registered
by that AppConfig too; this entry is the first of INSTALLED_APPS, as it asks.
"""

from __future__ import annotations

from django.apps import AppConfig


class DaphneConfig(AppConfig):
    name = "daphne"
    verbose_name = "Daphne"
