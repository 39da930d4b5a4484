"""Master-side authentication (docs/PROTOCOL.md §8) and the visit-token manager.

* ``auth_signature``: re-exported from ``tubemq.protocol.auth`` (the §8.1 signature).
* ``MasterAuthenticator``: the check of ``MasterCertificateInfo`` that the real master's
  ``SimpleCertificateMasterHandler.identityValidUserInfo`` makes when authentication is on, with its
  415 texts, in its order (userName, signature, timestamp window). Unlike the upstream placeholder it
  can also verify the signature against a user table, and it hands out an ``authAuthorizedToken`` on
  register that later heartbeats may present instead of a fresh ``AuthenticateInfo`` (the flow §8.2
  describes for clients; the upstream placeholder handler would reject such heartbeats).
* Replays: a signed ``AuthenticateInfo`` is accepted once. The (user, timestamp, nonce, signature) of
  each accepted one is remembered until its timestamp leaves the window, so the memory is bounded by
  the window (and by ``MAX_SEEN_SIGNATURES``; when that is full, new signatures are refused until
  old ones expire: fail closed). The real master has no such memory. The memory is journaled in the
  data directory (``ReplayJournal``: a hash and an expiry per accepted signature, appended before the
  answer, compacted as entries expire), so a master restarted inside the window still refuses them.
* ``FailureThrottle``: repeated bad credentials from one source (admin token, master passwords)
  are delayed per source, with bounded memory; other sources are not affected.
* ``VisitTokenManager``: the rotating ``visitAuthorizedToken`` (§4.11); the broker accepts any of the
  last 6 tokens (§8.3) through ``is_valid``. Unlike the real master's millisecond timestamps these are
  random, so they cannot be guessed.
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
import logging
import os
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tubemq.protocol import master_pb
from tubemq.protocol.auth import auth_signature
from tubemq.protocol.constants import AUTH_TIMESTAMP_VALID_MS, ErrorCode

log = logging.getLogger("tubemq.server.auth")

#: How many visit tokens the broker keeps accepting (SimpleVisitTokenManager, §8.3).
VISIT_TOKEN_HISTORY = 6
#: Bound on authorized tokens remembered for heartbeats (one per registered client is plenty).
MAX_AUTHORIZED_TOKENS = 65536

MSG_NO_CERTIFICATE = "Server required MasterCertificateInfo!"
MSG_USER_BLANK = "Illegal value: authInfo.userName is Blank!"
MSG_SIGNATURE_BLANK = "Illegal value: authInfo.signature is Blank!"
MSG_TIMESTAMP = "Illegal value: timestamp out of effective period in authenticateToken!"
MSG_BAD_PASSWORD = "Illegal value: userName or password is not correct!"
MSG_REPLAYED = "Illegal value: authenticateToken already used (a replayed request)!"
MSG_TOO_MANY = "Illegal value: too many authentications within the timestamp window, retry later!"
#: Longest delay per request of a source that keeps presenting bad credentials (FailureThrottle).
BAD_CREDENTIAL_DELAY_MAX_S = 2.0
#: The longest a throttled source's request waits (its reservations never reach further ahead).
MAX_THROTTLE_WAIT_S = 30.0
#: Bound on signatures remembered against replays (those younger than the timestamp window).
MAX_SEEN_SIGNATURES = 200_000


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _random_token() -> int:
    """A positive int64 from the OS's CSPRNG (63 bits: guessing one of 6 takes ~2^60 tries)."""
    return secrets.randbits(63)


@dataclass(frozen=True)
class AuthResult:
    """Outcome of a certificate check; ``authorized_token`` goes back as ``authAuthorizedToken``."""

    ok: bool
    err_code: int = ErrorCode.SUCCESS
    message: str = ""
    user_name: str = ""
    authorized_token: str = ""


_OK = AuthResult(True)


class ReplayJournal:
    """Accepted signatures on disk, ``<until ms> <sha256 hex>`` per line, so replays stay refused
    across a restart. Appends reach the OS before the register is answered (a killed master keeps
    them; power loss may lose the last ones). Rewritten without the expired lines once they outnumber
    the live ones, so the file stays bounded like the memory."""

    COMPACT_MIN = 1024

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1
        self._lines = 0
        self._failed = False

    def load(self, now_ms: int) -> dict[str, int]:
        """The live entries (digest -> until); torn or foreign lines are skipped."""
        live: dict[str, int] = {}
        try:
            text = self.path.read_text("ascii", errors="replace")
        except FileNotFoundError:
            text = ""
        except OSError as exc:
            log.error("cannot read the replay journal %s: %s", self.path, exc)
            text = ""
        for line in text.splitlines():
            until, _, digest = line.partition(" ")
            if len(digest) == 64 and until.isdigit() and int(until) >= now_ms:
                live[digest] = int(until)
        self._lines = len(live)
        self._rewrite(live)
        return live

    def append(self, until: int, digest: str, live: Mapping[str, int]) -> None:
        if self._lines >= max(self.COMPACT_MIN, 2 * len(live)):
            self._rewrite(live)
        try:
            if self._fd < 0:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.write(self._fd, f"{until} {digest}\n".encode("ascii"))
            self._lines += 1
            self._failed = False
        except OSError as exc:  # the running master still refuses the replay from memory
            if not self._failed:
                log.error("cannot journal an accepted authentication in %s: %s", self.path, exc)
            self._failed = True

    def _rewrite(self, live: Mapping[str, int]) -> None:
        self.close()
        tmp = self.path.with_suffix(".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text("".join(f"{u} {d}\n" for d, u in live.items()), "ascii")
            os.replace(tmp, self.path)
            self._lines = len(live)
        except OSError as exc:
            log.error("cannot rewrite the replay journal %s: %s", self.path, exc)

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


class MasterAuthenticator:
    """Checks ``MasterCertificateInfo`` when ``enabled`` (§8.2); everything passes when off."""

    def __init__(
        self,
        enabled: bool,
        users: Mapping[str, str] | None = None,
        *,
        valid_window_ms: int = AUTH_TIMESTAMP_VALID_MS,
        clock_ms: Callable[[], int] = _now_ms,
        journal: Path | None = None,
    ) -> None:
        self.enabled = enabled
        self._users = dict(users) if users else None
        self._window = valid_window_ms
        self._clock = clock_ms
        self._tokens: OrderedDict[str, str] = OrderedDict()  # authorized token -> user
        #: accepted signatures (their hash) -> until when they are remembered, and as an expiry heap
        self._seen: dict[str, int] = {}
        self._expiry: list[tuple[int, str]] = []
        self._journal = ReplayJournal(journal) if enabled and journal is not None else None
        if self._journal is not None:
            self._seen = self._journal.load(self._clock())
            self._expiry = [(u, d) for d, u in self._seen.items()]
            heapq.heapify(self._expiry)

    def check(self, cert: master_pb.MasterCertificateInfo | None, *, allow_token: bool = False) -> AuthResult:
        """Validate a request's certificate; ``allow_token`` accepts a token issued by ``issue_token``.

        Absent sub-messages count as empty ones, as in Java (getters never return null), so a
        request without ``authInfo`` fails with the blank-userName text.
        """
        if not self.enabled:
            return _OK
        if cert is None:
            return AuthResult(False, ErrorCode.CERTIFICATE_FAILURE, MSG_NO_CERTIFICATE)
        if allow_token and not cert.HasField("authInfo"):
            token = cert.authorizedToken.strip()
            user = self._tokens.get(token) if token else None
            if user is not None:
                return AuthResult(True, user_name=user, authorized_token=token)
        info = cert.authInfo
        user = info.userName.strip()
        if not user:
            return AuthResult(False, ErrorCode.CERTIFICATE_FAILURE, MSG_USER_BLANK)
        signature = info.signature.strip()
        if not signature:
            return AuthResult(False, ErrorCode.CERTIFICATE_FAILURE, MSG_SIGNATURE_BLANK)
        if abs(self._clock() - info.timestamp) > self._window:
            return AuthResult(False, ErrorCode.CERTIFICATE_FAILURE, MSG_TIMESTAMP)
        if self._users is not None:
            password = self._users.get(user)
            expected = (
                None if password is None else auth_signature(user, password, info.timestamp, info.nonce)
            )
            if expected is None or not hmac.compare_digest(expected, signature):
                return AuthResult(False, ErrorCode.CERTIFICATE_FAILURE, MSG_BAD_PASSWORD)
        refused = self._remember(user, info.timestamp, info.nonce, signature)
        if refused:
            return AuthResult(False, ErrorCode.CERTIFICATE_FAILURE, refused)
        return AuthResult(True, user_name=user)

    def _remember(self, user: str, timestamp: int, nonce: int, signature: str) -> str:
        """Record an accepted signature; returns the refusal text for a replay ("" when new)."""
        now = self._clock()
        expiry = self._expiry
        while expiry and expiry[0][0] < now:
            self._seen.pop(heapq.heappop(expiry)[1], None)
        key = hashlib.sha256(f"{user}\0{timestamp}\0{nonce}\0{signature}".encode("utf-8", "surrogatepass")).hexdigest()
        if key in self._seen:
            log.warning("refused a replayed authentication of user %r", user)
            return MSG_REPLAYED
        if len(self._seen) >= MAX_SEEN_SIGNATURES:
            return MSG_TOO_MANY
        until = timestamp + self._window
        self._seen[key] = until
        heapq.heappush(expiry, (until, key))
        if self._journal is not None:
            self._journal.append(until, key, self._seen)
        return ""

    def close(self) -> None:
        """Close the replay journal's file (the entries stay for the next start)."""
        if self._journal is not None:
            self._journal.close()

    def issue_token(self, user_name: str) -> str:
        """A token for later heartbeats of an authenticated client (bounded LRU)."""
        if not self.enabled:
            return ""
        token = secrets.token_urlsafe(18)
        self._tokens[token] = user_name
        while len(self._tokens) > MAX_AUTHORIZED_TOKENS:
            self._tokens.popitem(last=False)
        return token


class FailureThrottle:
    """Per-source delay after repeated bad credentials: guessing a password or token gets slow.

    A source may fail ``free`` times within ``forget_s`` without effect; each further failure makes
    its next requests wait ``base_s`` doubled per failure, at most ``max_s`` (default
    ``BAD_CREDENTIAL_DELAY_MAX_S``; 0 turns the delay off), and reserves a slot, so
    one source's parallel guesses are spaced out too. Sources are kept in an LRU of ``max_sources``
    entries and forgotten ``forget_s`` after their last failure; a success clears the source.
    """

    def __init__(
        self,
        max_s: float | None = None,
        *,
        free: int = 5,
        base_s: float = 0.05,
        forget_s: float = 60.0,
        max_sources: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_s = BAD_CREDENTIAL_DELAY_MAX_S if max_s is None else max_s
        self.free = free
        self.base_s = base_s
        self.forget_s = forget_s
        self.max_sources = max_sources
        self._clock = clock
        #: source -> [failures, time of the last failure, earliest time its next request is served]
        self._sources: OrderedDict[str, list[float]] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.max_s > 0

    def wait(self, source: str) -> float:
        """Seconds a request from ``source`` must wait before being handled (0: at once)."""
        entry = self._sources.get(source)
        if entry is None:
            return 0.0
        now = self._clock()
        if now - entry[1] > self.forget_s:
            del self._sources[source]
            return 0.0
        return max(0.0, entry[2] - now)

    def failure(self, source: str) -> float:
        """Record a bad credential from ``source``; returns the delay its next request will wait."""
        if not self.enabled:
            return 0.0
        now = self._clock()
        entry = self._sources.pop(source, None)
        if entry is None or now - entry[1] > self.forget_s:
            entry = [0.0, now, now]
        entry[0] += 1
        entry[1] = now
        excess = int(entry[0]) - self.free
        if excess > 0:
            step = min(self.max_s, self.base_s * 2 ** min(excess - 1, 30))
            entry[2] = min(max(entry[2], now) + step, now + MAX_THROTTLE_WAIT_S)
            if excess == 1:
                log.warning("bad credentials from %s: delaying its requests", source)
        self._sources[source] = entry
        while len(self._sources) > self.max_sources:
            self._sources.popitem(last=False)
        return max(0.0, entry[2] - now)

    def success(self, source: str) -> None:
        self._sources.pop(source, None)

    def __len__(self) -> int:
        return len(self._sources)


class VisitTokenManager:
    """Rotating visit tokens; the last 6 stay valid (``SimpleVisitTokenManager``, §8.3).

    The real master hands out millisecond timestamps, which anyone can guess (a forged send gets
    through after a few hundred guesses). These tokens are random positive int64 values (the wire
    field ``visitAuthorizedToken`` is an int64), drawn with ``secrets``: never -2 (the client's
    "no token yet"), never a token still in the history.
    """

    def __init__(
        self,
        rotate_period_ms: int,
        *,
        clock_ms: Callable[[], int] = _now_ms,
        random_token: Callable[[], int] | None = None,
    ) -> None:
        if rotate_period_ms <= 0:
            raise ValueError("rotate_period_ms must be positive")
        self._period = rotate_period_ms
        self._clock = clock_ms
        self._random = random_token or _random_token
        self._tokens: deque[int] = deque(maxlen=VISIT_TOKEN_HISTORY)
        self._last_rotation = 0
        self.rotate()

    @property
    def current(self) -> int:
        """``visitAuthorizedToken`` handed to clients in register/heartbeat responses."""
        return self._tokens[-1]

    def tokens(self) -> list[int]:
        return list(self._tokens)

    def rotate(self) -> int:
        """Start a new random token now (distinct from every token still accepted)."""
        token = self._random()
        while token <= 0 or token in self._tokens:
            token = self._random()
        self._tokens.append(token)
        self._last_rotation = self._clock()
        return token

    def rotate_if_due(self) -> bool:
        """Rotate when a period has passed since the last rotation; returns whether it did."""
        if self._clock() - self._last_rotation >= self._period:
            self.rotate()
            return True
        return False

    def is_valid(self, token: int) -> bool:
        """True for any of the last ``VISIT_TOKEN_HISTORY`` tokens (the broker's check, §8.3)."""
        return token in self._tokens

    def broker_tokens(self) -> str:
        """``"valid,fresh"`` string form the master pushes to brokers (§3.6)."""
        toks = list(self._tokens)
        return f"{toks[0]},{toks[-1]}"
