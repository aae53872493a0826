from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser

THEMES = ("system", "light", "dark")
# In a user's metadata: an approval of their account they have not been told of yet (their next
# sign-in tells them: accounts.signals).
APPROVAL_UNTOLD = "approval_untold"


class User(AbstractUser):
    """A Rollback user. `metadata` holds preferences such as `auto_checkpoint` and `theme`.

    `approval`: an account signed up while ACCOUNTS_PENDING is on waits ("pending", and not
    active) until an administrator approves it (active from then) or refuses it; every other
    account is "approved" (accounts.approval)."""

    class Approval(models.TextChoices):
        APPROVED = "approved", "Approved"
        PENDING = "pending", "Waiting for approval"
        REFUSED = "refused", "Refused"

    metadata = models.JSONField(default=dict, blank=True)
    # A default in the database too: rows written by code that predates the column (an older
    # migration's models, run in tests that migrate one app back) are approved accounts.
    approval = models.CharField(
        max_length=16,
        choices=Approval.choices,
        default=Approval.APPROVED,
        db_default=Approval.APPROVED,
        db_index=True,
    )
    # When an administrator approved or refused the account (None: never decided).
    approval_decided_at = models.DateTimeField(null=True, blank=True)

    class Meta(AbstractUser.Meta):
        swappable = "AUTH_USER_MODEL"
        constraints: ClassVar[list[models.BaseConstraint]] = [
            # "Alice" and "alice" are one person to a human: the database says so too.
            models.UniqueConstraint(Lower("username"), name="username_unique_ignoring_case"),
        ]

    def preference(self, key: str, default: Any = None) -> Any:
        prefs = self.metadata.get("preferences", {}) if isinstance(self.metadata, dict) else {}
        return prefs.get(key, default) if isinstance(prefs, dict) else default


class SiteSettings(models.Model):
    """Settings of the whole server: one row, pk 1, edited in the admin."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    signup_open = models.BooleanField(
        "sign-up open",
        default=True,
        help_text=(
            "Let anyone create an account on the sign-up page. The very first account can always "
            "be created (it becomes the administrator)."
        ),
    )

    class Meta:
        verbose_name = "site settings"
        verbose_name_plural = "site settings"
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.CheckConstraint(condition=Q(id=1), name="site_settings_singleton")
        ]

    def __str__(self) -> str:
        return "Site settings"

    @classmethod
    def load(cls) -> SiteSettings:
        return cls.objects.get_or_create(pk=1)[0]


class ApiKeyQuerySet(models.QuerySet["ApiKey"]):
    def for_user(self, user: User | AnonymousUser) -> ApiKeyQuerySet:
        if not getattr(user, "is_authenticated", False):
            return self.none()
        return self.filter(user=user.pk)

    def active(self) -> ApiKeyQuerySet:
        return self.filter(revoked_at__isnull=True)


class ApiKey(models.Model):
    """A secret a user gives a program to act as them. Only its SHA-256 is stored: the secret is
    shown once, when the key is made, and a lost key is revoked and replaced."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(
        max_length=12, db_index=True, help_text="The key's first characters, to recognise it."
    )
    key_hash = models.CharField(max_length=64, unique=True, help_text="SHA-256 (hex) of the key.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        verbose_name = "API key"
        ordering: ClassVar[list[str]] = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class SsoIdentity(models.Model):
    """An account's identity at the single sign-on provider: the provider's issuer and its
    subject (`sub`, stable and never reassigned). A sign-in finds its account by these alone,
    never by an e-mail address (accounts.oidc)."""

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="sso_identities")
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)
    last_sign_in_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "single sign-on identity"
        verbose_name_plural = "single sign-on identities"
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
