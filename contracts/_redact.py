"""The one redaction policy: which header values and query parameters are credentials, and how every
writer (stores, exports, reports, the acceptance report folder, logs) hides them.

Credentials were written in clear wherever a writer had its own idea of what a
credential is. Here there is one idea. A header is a credential when its name is on the list, or when
it ends like one (``-api-key``, ``-token``, ...: provider gateways invent new names such as
``x-portkey-api-key`` faster than a list keeps up); a query parameter is a credential when its key is
on the query list (Google's ``?key=``, ``?api_key=``, ``?access_token=``, ...). Values become
``[redacted]``; names, order and everything else stay as they were, so a redacted capture still
replays (replay drops redacted values and sets its ``--header`` values in their place).

Redaction is applied when writing, never when forwarding: the upstream gets what the caller sent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from ._exchange import Exchange, HttpRequest, HttpResponse

__all__ = [
    "DEFAULT_REDACTION",
    "DEFAULT_REDACT_HEADERS",
    "DEFAULT_REDACT_HEADER_SUFFIXES",
    "DEFAULT_REDACT_QUERY",
    "REDACTED",
    "Redaction",
]

#: What a redacted value reads as, in headers and in query strings.
REDACTED = "[redacted]"

#: Header names (lower case) whose values are credentials.
DEFAULT_REDACT_HEADERS = frozenset(
    {
        "authorization",  # OpenAI, vLLM --api-key, most gateways (Bearer ...)
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "x-api-key",  # Anthropic, many gateways
        "api-key",  # Azure OpenAI
        "x-goog-api-key",  # Google Gemini
        "x-auth-token",
        "x-access-token",
        "x-amz-security-token",  # AWS (Bedrock) session tokens
        "ocp-apim-subscription-key",  # Azure API Management
        "x-functions-key",  # Azure Functions
        "openai-api-key",
        "anthropic-api-key",
        "x-litellm-api-key",
        "x-portkey-api-key",
        "cf-access-client-secret",  # Cloudflare Access service tokens
    }
)

#: Header name endings that mark a credential whatever the prefix (``x-<vendor>-api-key`` ...).
DEFAULT_REDACT_HEADER_SUFFIXES = ("-api-key", "-apikey", "-token", "-secret")

#: Query parameter keys (lower case) whose values are credentials.
DEFAULT_REDACT_QUERY = frozenset(
    {
        "api_key",
        "api-key",
        "apikey",
        "key",  # Google APIs: ?key=
        "token",
        "access_token",
        "auth",
        "auth_token",
        "id_token",
        "refresh_token",
        "client_secret",
        "secret",
        "password",
        "sig",  # Azure SAS signatures
        "signature",
        "x-amz-signature",
        "x-amz-security-token",
        "x-goog-signature",
        "code",  # OAuth authorization codes
    }
)


#: header names whose verdict a policy keeps
_NAMES_KEPT = 1024


@dataclass(frozen=True, kw_only=True, slots=True)
class Redaction:
    """Which header values and query parameters every writer replaces with ``[redacted]``.

    ``Redaction()`` is the default list; :meth:`extended` adds names (``--redact NAME``), each to both
    lists, since a name such as ``x-tenant-secret`` may travel as a header or as a query key.
    """

    headers: frozenset[str] = DEFAULT_REDACT_HEADERS
    header_suffixes: tuple[str, ...] = DEFAULT_REDACT_HEADER_SUFFIXES
    query_keys: frozenset[str] = DEFAULT_REDACT_QUERY
    #: header name, as sent -> its verdict: a few names recur on every request and response, each
    #: tested once (up to ``_NAMES_KEPT``: a caller's own names are not bounded). Not part of the policy
    _verdicts: dict[str, bool] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def extended(self, names: Iterable[str]) -> Redaction:
        """This policy plus ``names`` (comma-separated items allowed; case does not matter)."""
        extra = frozenset(n.strip().lower() for item in names for n in item.split(",") if n.strip())
        if not extra:
            return self
        return dataclasses.replace(self, headers=self.headers | extra, query_keys=self.query_keys | extra)

    # --- what is a credential ----------------------------------------------------------------------

    def is_secret_header(self, name: str) -> bool:
        verdict = self._verdicts.get(name)
        if verdict is None:
            n = name.strip().lower()
            verdict = n in self.headers or n.endswith(self.header_suffixes)
            if len(self._verdicts) < _NAMES_KEPT:
                self._verdicts[name] = verdict
        return verdict

    def kept_verdicts(self) -> Mapping[str, bool]:
        """The verdicts this policy keeps, by header name as sent (those :meth:`is_secret_header`
        has given so far): the live mapping, for a writer that reads it in place and asks
        :meth:`is_secret_header` of a name not in it. Never written through."""
        return self._verdicts

    def is_secret_query_key(self, key: str) -> bool:
        return unquote_plus(key).strip().lower() in self.query_keys

    # --- redacting ---------------------------------------------------------------------------------

    def header_list(self, headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        # the verdicts kept are looked up here, without a call a header: every header of every
        # exchange recorded passes here, twice (the tap's record, then the store's writer)
        known, out = self._verdicts, []
        for k, v in headers:
            secret = known.get(k)
            if secret is None:
                secret = self.is_secret_header(k)
            out.append((k, REDACTED if secret else v))
        return out

    def header_object(self, headers: list[tuple[str, str]]) -> dict[str, str] | None:
        """``dict(self.header_list(headers))`` built in one pass, or None where the object would not
        hold every header: a name given twice, also in another case (written as a list of pairs
        then). Every store row writes two header lists so, on the store writer's thread, which
        shares the forwarding loop's interpreter."""
        known, out = self._verdicts, {}
        for k, v in headers:
            secret = known.get(k)
            if secret is None:
                secret = self.is_secret_header(k)
            out[k] = REDACTED if secret else v
        if len(out) != len(headers):
            return None
        # names in lower case (as HTTP/2 and most servers send them) differ in lower case too;
        # lowering the names joined is one call, where lowering each was a call a header
        names = "\n".join(out)
        if names == names.lower() or len(set(map(str.lower, out))) == len(out):
            return out
        return None

    def header_dict(self, headers: dict[str, str]) -> dict[str, str]:
        return {k: REDACTED if self.is_secret_header(k) else v for k, v in headers.items()}

    def query(self, query: str) -> str:
        """A query string with credential values replaced; every other byte is kept as it was."""
        if not query:
            return query
        parts = []
        for part in query.split("&"):
            key, sep, _ = part.partition("=")
            parts.append(f"{key}={REDACTED}" if sep and self.is_secret_query_key(key) else part)
        return "&".join(parts)

    def target(self, target: str) -> str:
        """A request target (``/path?query``, or an absolute URL) with its query redacted, and any
        ``user:password@`` in an absolute URL dropped."""
        path, sep, query = target.partition("?")
        if "://" in path:
            path = self.url(path)
        return path + sep + self.query(query) if sep else path

    def url(self, url: str) -> str:
        """An absolute URL without userinfo, with its query redacted."""
        try:
            u = urlsplit(url)
        except ValueError:
            return url
        netloc = u.netloc.rpartition("@")[2] if "@" in u.netloc else u.netloc
        return urlunsplit((u.scheme, netloc, u.path, self.query(u.query), u.fragment))

    def text(self, text: str, secrets: Iterable[str]) -> str:
        """``text`` with each of ``secrets`` (values known to be credentials, such as ``--header``
        values) replaced: for messages and logs that may quote them."""
        for s in secrets:
            if len(s) >= 4:
                text = text.replace(s, REDACTED)
        return text

    def exchange(self, ex: Exchange) -> Exchange:
        """A copy of ``ex`` as a writer may store it (the original is left alone). ``dump_exchange``
        redacts the same parts the same way, part by part, without the copy."""
        req = ex.request
        request = HttpRequest(req.method, self.target(req.path), self.header_list(req.headers), req.body)
        response = None
        if ex.response is not None:
            r = ex.response
            response = HttpResponse(r.status, self.header_list(r.headers), r.body, r.chunks)
        return ex.with_parts(request, response)


#: The default policy, for writers that were given none.
DEFAULT_REDACTION = Redaction()
