"""A real OpenID Connect provider for the single sign-on tests: django-oauth-toolkit's, in a
Django project of its own (a second process, its own SQLite file), with a login page, its keys
and an application for Rollback (tests.oidc_provider.server starts it)."""
