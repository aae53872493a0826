"""End-to-end tests: the app served by daphne in a subprocess, driven by a real Chromium.

The app talks to a FakeChatServer (a real local Chat Completions server) and keeps its data in a
fresh SQLite file. The plain tests run in the SQLite phase of `make test` (no REDIS_URL); in the
Redis phase only the tests also marked `redis` run (they start their own Redis-backed stack).

When a test fails, a screenshot of each of its pages goes to test-artifacts/e2e/ and the last
lines of the served processes' logs are added to the failure report.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.procs import Services, app_env, prepared  # used by the test modules

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
ARTIFACTS = ROOT / "test-artifacts" / "e2e"
# Chromium's headless shell (Debian's chromium-headless-shell, the same engine as the browser
# without its windowing layers): what Playwright itself runs for headless tests. It takes about
# half the CPU of the full browser in headless mode, on two cores the suite's largest cost.
CHROMIUM = "/usr/bin/chromium-headless-shell"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Bounds of failures, not of speed: `make test` runs the browser tests beside the rest of the
# suite on two cores, where a page's step can take seconds. (A wait that holds returns at once.)
TIMEOUT_MS = 30_000
TURN_TIMEOUT_MS = 60_000
PASSWORD = "e2e-Long-passw0rd-42"  # noqa: S105 - a test user's password

# Counts the chat page's open WebSockets (htmx's ws extension fires these events).
WS_TRACKER = """
window.__e2eWsOpen = 0;
document.addEventListener("htmx:wsOpen", function () { window.__e2eWsOpen += 1; });
document.addEventListener("htmx:wsClose", function () { window.__e2eWsOpen -= 1; });
"""
# Logs what the Content Security Policy blocked; Contexts collects it and the test fails.
CSP_WATCH = """
document.addEventListener("securitypolicyviolation", function (e) {
  console.error("csp-violation: " + e.effectiveDirective + " blocked " + (e.blockedURI || "inline")
    + " at " + e.sourceFile + ":" + e.lineNumber + " " + (e.sample || ""));
});
"""

FINISHED_ASSISTANT = "#messages [data-testid=message][data-role=assistant]:not([data-streaming])"
USER_MESSAGE = "#messages [data-testid=message][data-role=user]"


def pytest_collection_modifyitems(config, items):
    """In the Redis phase the plain end-to-end tests are skipped: they ran in the SQLite phase."""
    if not os.environ.get("REDIS_URL", "").startswith("redis"):
        return
    skip = pytest.mark.skip(reason="plain end-to-end tests run in the SQLite phase of make test")
    for item in items:
        if HERE in Path(item.path).parents and "redis" not in item.keywords:
            item.add_marker(skip)


# --- Processes ---------------------------------------------------------------------------------


@pytest.fixture(scope="package")
def app_settings(model_server, tmp_path_factory) -> dict[str, str]:
    """The served app's environment: manage.py commands run with it use its database."""
    return app_env(tmp_path_factory.mktemp("e2e-var"), model_server.base_url)


@pytest.fixture(scope="package")
def app(app_settings, tmp_path_factory) -> Iterator[Services]:
    """The app served by daphne: turns run on its in-process thread pool, events go over the
    in-memory channel layer."""
    services = Services(tmp_path_factory.mktemp("e2e-logs"))
    env = app_settings
    try:
        services.prepare(env)
        services.start_daphne(env)
        yield services
    finally:
        services.stop_all()


def served(env: dict[str, str], logs: Path) -> Iterator[Services]:
    """The app served by daphne in `env`, its var directory made ready, every process stopped at
    the end: for a module's own app fixture (`yield from served(...)`)."""
    with prepared(env, logs) as services:
        services.start_daphne(env)
        yield services


# --- The browser -------------------------------------------------------------------------------


@pytest.fixture(scope="package")
def browser():
    """Debian's Chromium headless shell, never a downloaded browser. Package scope: Playwright's
    sync API keeps an event loop running in this thread, which Django's ORM refuses in the tests
    after these."""
    if not os.access(CHROMIUM, os.X_OK):
        reason = (
            f"{CHROMIUM} is missing: install Debian's package "
            "(apt-get install chromium-headless-shell)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)
    playwright = sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield chromium
        finally:
            chromium.close()
    finally:
        playwright.stop()


class Contexts:
    """Browser contexts (separate cookie jars: separate users) opened by one test."""

    def __init__(self, browser) -> None:
        self.browser = browser
        self.opened: list = []
        self.csp_violations: list[str] = []

    def new(self, **options):
        """A new context; `options` go to Playwright's new_context (say, timezone_id)."""
        options = {"viewport": {"width": 1280, "height": 900}, **options}
        context = self.browser.new_context(**options)
        context.set_default_timeout(TIMEOUT_MS)
        context.add_init_script(WS_TRACKER)
        context.add_init_script(CSP_WATCH)
        context.on("console", self._console)
        self.opened.append(context)
        return context

    def _console(self, message) -> None:
        """Chromium reports each blocked script, style, eval or connection on the console too."""
        text = message.text
        if text.startswith("csp-violation:") or "Content Security Policy" in text:
            self.csp_violations.append(f"{message.page.url if message.page else '?'}: {text}")

    def pages(self) -> list:
        return [page for context in self.opened for page in context.pages]

    def close(self) -> None:
        for context in self.opened:
            with contextlib.suppress(Exception):  # already closed
                context.close()


@pytest.fixture
def contexts(browser) -> Iterator[Contexts]:
    """The test's browser contexts; it fails if the Content Security Policy blocked anything."""
    opened = Contexts(browser)
    yield opened
    opened.close()
    assert not opened.csp_violations, "\n".join(opened.csp_violations)


@pytest.fixture
def page(contexts: Contexts, app: Services):
    """A page in a new browser context (no cookies: nobody signed in)."""
    return contexts.new().new_page()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"rep_{report.when}", report)
    expected = hasattr(report, "wasxfail")
    if report.failed and not expected and report.when in ("setup", "call"):
        funcargs = getattr(item, "funcargs", {})
        for value in funcargs.values():
            if isinstance(value, Contexts):
                for shot in _screenshots(item.name, value):
                    report.sections.append(("screenshot", str(shot)))
        for value in funcargs.values():
            if isinstance(value, Services):
                report.sections.extend(value.tail())
    return report


def _screenshots(test_name: str, opened: Contexts) -> list[Path]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", test_name)
    saved = []
    for n, page in enumerate(opened.pages(), start=1):
        path = ARTIFACTS / (f"{name}.png" if n == 1 else f"{name}-{n}.png")
        try:
            page.screenshot(path=str(path), full_page=True, timeout=5000)
        except Exception:  # noqa: S112 - a closed or crashed page has no screenshot
            continue
        saved.append(path)
    return saved


# --- What a user does --------------------------------------------------------------------------


def sign_up(page, base_url: str, prefix: str = "user") -> str:
    """Create a fresh account through the sign-up page; it lands signed in on the chat."""
    username = f"{prefix}{uuid.uuid4().hex[:10]}"
    page.goto(f"{base_url}/accounts/signup/")
    page.get_by_test_id("username").fill(username)
    page.get_by_test_id("password").fill(PASSWORD)
    page.get_by_test_id("password2").fill(PASSWORD)
    with page.expect_navigation():
        page.get_by_test_id("submit").click()
    page.wait_for_url(re.compile(r"/chat/(\d+/)?$"))
    return username


def sign_in(page, base_url: str, username: str) -> None:
    """Sign in through the login page as `username` (with the tests' password)."""
    page.goto(f"{base_url}/accounts/login/")
    page.get_by_test_id("username").fill(username)
    page.get_by_test_id("password").fill(PASSWORD)
    with page.expect_navigation():
        page.get_by_test_id("submit").click()


def sign_in_as_staff(page, app, app_settings) -> str:
    """Make a superuser in the served app's database and sign in as them; the username."""
    username = f"staff{uuid.uuid4().hex[:10]}"
    make = f"User.objects.create_superuser({username!r}, password={PASSWORD!r})"
    app.manage(app_settings, "shell", "-c", f"from accounts.models import User; {make}")
    sign_in(page, app.base_url, username)
    return username


def wait_ws_open(page) -> None:
    """The chat page's WebSocket is open (events sent before that would be missed)."""
    # A function, not a bare expression: Playwright evaluates a bare expression again on every
    # poll, with eval, which the page's Content Security Policy refuses.
    page.wait_for_function("() => window.__e2eWsOpen > 0")


def session_id(page) -> int:
    found = re.search(r"/chat/(\d+)/$", page.url)
    assert found, f"not on a session page: {page.url}"
    return int(found.group(1))


def new_session(page) -> int:
    """Click "New session"; returns the new session's id once its page is live."""
    with page.expect_navigation():
        page.get_by_test_id("new-session").first.click()
    page.wait_for_url(re.compile(r"/chat/\d+/$"))
    wait_ws_open(page)
    return session_id(page)


def keep_session(page, session: int) -> None:
    """Give a session metadata of its own (through the API), so that the next "New session"
    makes another instead of opening this blank one again."""
    status = page.evaluate(
        """async (id) => {
            const token = document.cookie.match(/csrftoken=([^;]+)/)[1];
            const answer = await fetch(`/api/v1/sessions/${id}/`, {
                method: "PATCH",
                headers: {"Content-Type": "application/json", "X-CSRFToken": token},
                body: JSON.stringify({metadata: {"made_by": "test"}}),
            });
            return answer.status;
        }""",
        session,
    )
    assert status == 200


def counts(page) -> dict[str, int]:
    return page.evaluate(
        """([assistants, users]) => ({
            assistants: document.querySelectorAll(assistants).length,
            users: document.querySelectorAll(users).length,
        })""",
        [FINISHED_ASSISTANT, USER_MESSAGE],
    )


def send_message(page, text: str) -> dict[str, int]:
    """Type a message and press Enter. Returns the message counts from just before."""
    box = page.get_by_test_id("message-input")
    box.wait_for()
    page.wait_for_function(
        "() => { const b = document.querySelector('[data-testid=message-input]');"
        " const a = document.querySelector('#composer-actions');"
        " return b && !b.disabled && a && a.dataset.busy === 'false'; }"
    )
    before = counts(page)
    box.fill(text)
    with page.expect_response(
        lambda r: r.request.method == "POST" and r.url.endswith("/send/")
    ) as answer:
        box.press("Enter")
    assert answer.value.status == 200, f"sending was refused: {answer.value.status}"
    return before


def wait_turn_done(page, before: dict[str, int], timeout: float = TURN_TIMEOUT_MS) -> None:
    """The turn started after `before` has ended: its user message is shown, a new reply (or the
    turn's error) is shown, no bubble is streaming and the composer takes input again."""
    page.wait_for_function(
        """([before, assistants, users]) => {
            const box = document.querySelector("[data-testid=message-input]");
            if (!box || box.disabled) return false;
            const actions = document.querySelector("#composer-actions");
            if (!actions || actions.dataset.busy !== "false") return false;
            if (document.querySelector("[data-streaming=true]")) return false;
            if (document.querySelectorAll(users).length <= before.users) return false;
            return document.querySelectorAll(assistants).length > before.assistants
                || !!document.querySelector("#messages [data-testid=turn-error]");
        }""",
        arg=[before, FINISHED_ASSISTANT, USER_MESSAGE],
        timeout=timeout,
    )


def chat(page, text: str) -> None:
    """Send a message and wait for the whole turn."""
    wait_turn_done(page, send_message(page, text))


def message_texts(page, role: str | None = None) -> list[str]:
    selector = "#messages [data-testid=message]:not([data-streaming])"
    if role:
        selector += f"[data-role={role}]"
    return [text.strip() for text in page.locator(f"{selector} .body").all_inner_texts()]


def last_reply(page) -> str:
    return page.locator(f"{FINISHED_ASSISTANT} .body").last.inner_text().strip()


def save_checkpoint(page, name: str) -> None:
    page.get_by_test_id("checkpoint-name").fill(name)
    with page.expect_response(lambda r: "/checkpoints/" in r.url and r.request.method == "POST"):
        page.get_by_test_id("save-checkpoint").click()
    checkpoint(page, name).wait_for()


def checkpoint(page, name: str):
    """The checkpoint named `name` in the side panel."""
    return page.get_by_test_id("checkpoint").filter(
        has=page.locator(".name", has_text=re.compile(rf"^{re.escape(name)}$"))
    )


def open_restore(page, name: str):
    """Open the restore dialog of checkpoint `name`; returns the dialog."""
    checkpoint(page, name).get_by_test_id("restore").click()
    dialog = page.get_by_test_id("restore-dialog")
    dialog.wait_for(state="visible")
    return dialog


def current_branch_id(page) -> str:
    return page.get_by_test_id("current-branch").get_attribute("data-branch-id")


def conversation(messages: list[dict]) -> list[tuple[str, str]]:
    """(role, content) of the user and assistant messages of a model request."""
    return [
        (m["role"], m.get("content") or "")
        for m in messages
        if m.get("role") in ("user", "assistant")
    ]


# Records, every 20 ms, the text of the bubble being streamed.
RECORD_STREAM = """() => {
    window.__streamed = [];
    window.__recorder = setInterval(() => {
        const body = document.querySelector("[data-streaming=true] .body");
        if (body) window.__streamed.push(body.textContent);
    }, 20);
}"""


def record_stream(page) -> None:
    page.evaluate(RECORD_STREAM)


def assert_seen_streaming(page, final: str) -> None:
    """The reply was seen part-way (a proper prefix of its final text) before it was complete."""
    seen = page.evaluate("() => { clearInterval(window.__recorder); return window.__streamed; }")
    partial = [text for text in seen if text.strip() and text.strip() != final]
    assert partial, f"the reply was never seen part-way: {seen!r}"
    assert all(final.startswith(text) for text in partial), seen
