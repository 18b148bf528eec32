# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""HTTP scheduler extenders: a site's own filter and score services, in kube-scheduler's wire format.

A profile lists ``extenders`` with the field names of KubeSchedulerConfiguration's ``extenders``
(k8s.io/kube-scheduler/config/v1 ``Extender``): ``urlPrefix``, ``filterVerb``, ``prioritizeVerb``,
``weight``, ``nodeCacheCapable``, ``httpTimeout``, ``ignorable``, ``managedResources``, ``enableHTTPS``,
``tlsConfig``; plus ``bearerToken`` / ``bearerTokenFile`` (gangplank's, for extenders that are not on the
controller). This file reads that configuration, builds the Pod and Node objects a kube extender reads and
kube's ``ExtenderArgs`` (k8s.io/kube-scheduler/extender/v1), and reads ``ExtenderFilterResult`` and
``HostPriorityList`` answers strictly: anything else is an ``ExtenderError`` naming the extender
(plugins/extender.py decides what an error does). It does no I/O: whoever builds the profile hands in a transport
(module_utils/extender/transport.py's HTTPTransport for real HTTP), which reads the token and PEM files, sets up
TLS (``file_is_regular``, ``read_token_file``, ``tls_context``) and makes the calls (``call_round``), bringing back
the bytes of each answer.

Bounds: at most MAX_EXTENDERS extenders; each call has its own deadline (``httpTimeout``, at most
MAX_HTTP_TIMEOUT, enforced by the transport on the whole exchange, name resolution to last byte), and an
extender spends at most MAX_PLAN_SECONDS in one plan; plugins/extender.py makes at most one call per service
and verb per plan. So one plan waits at most MAX_EXTENDERS x MAX_PLAN_SECONDS for extenders, whatever the
number of services. Answers met again in a round are decoded once, at most MAX_KEPT_ANSWER_BYTES of them kept
(_decode).

The bearer token never appears in a message, a result or a repr: errors quote at most a snippet of an answer,
the token blotted out of the whole answer before it is cut.
"""

from __future__ import annotations

import binascii
import ipaddress
import json
import os
import re
import urllib.parse
import uuid

from ansible_collections.gangplank.platform.plugins.module_utils.messages import SHOW_LIMIT, show
from ansible_collections.gangplank.platform.plugins.module_utils.reader import join_path
from ansible_collections.gangplank.platform.plugins.module_utils.validation import has_control, one_line, well_formed

MAX_EXTENDERS = 8
DEFAULT_HTTP_TIMEOUT = 5.0          # seconds: kube's DefaultExtenderTimeout
MAX_HTTP_TIMEOUT = 60.0
MAX_PLAN_SECONDS = 120.0            # one extender's total time in one plan
MAX_WEIGHT = 1000
MAX_EXTENDER_PRIORITY = 10          # kube's MaxExtenderPriority: answers' scores are 0..10
MAX_TOKEN = 16384                   # characters of a bearer token
MAX_TLS_DATA = 1024 * 1024          # characters of base64 in certData, keyData or caData (a CA bundle is ~200 KiB)
MAX_REASON = 200                    # characters of one failure reason kept for the "0/N nodes" line
MAX_WARNINGS = 20                   # per extender
MAX_KEPT_ANSWER_BYTES = 4 * 1024 * 1024  # answers of one round kept decoded, to read one met again without decoding it
NAMESPACE = "gangplank"

# Extended resources and annotations of the Pod and Node objects (docs/problem-format.md, "Extenders").
GPU_RESOURCE = "nvidia.com/gpu"                 # whole GPUs, as NVIDIA's device plugin names them
GPU_MEMORY_RESOURCE = "gangplank.io/gpu-memory"  # GPU shares: bytes of GPU memory in all
NVME_RESOURCE = "gangplank.io/nvme"             # bytes of NVMe space
ANNOTATION = "gangplank.io/"

_KEYS = ("urlPrefix", "filterVerb", "prioritizeVerb", "weight", "nodeCacheCapable", "httpTimeout", "ignorable",
         "managedResources", "enableHTTPS", "tlsConfig", "bearerToken", "bearerTokenFile", "bindVerb", "preemptVerb")
_TLS_KEYS = ("insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData")
# Whole-string patterns: each is used with validation.well_formed (fullmatch, no control character, bounded).
_VERB = re.compile(r"[A-Za-z0-9._~-][A-Za-z0-9._~/-]{0,199}")
MAX_VERB = 200
# Go's time.ParseDuration: an optional sign, then numbers with a unit each (digits before or after the point, or
# both), or "0" alone. µ is U+00B5 (micro sign) or U+03BC (Greek mu), as Go accepts both.
_DURATION = re.compile(r"[+-]?(?:0|(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+)")
MAX_DURATION = 64
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_TOKEN = re.compile(r"[\x21-\x7e]+")
_VAULTED = ("EncryptedString", "AnsibleVaultEncryptedUnicode")
_RESOURCE_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_./]{0,251}[A-Za-z0-9])?")
MAX_RESOURCE_NAME = 253
# tlsConfig.serverName: a DNS name or an IP address (what TLS checks the certificate against).
_SERVER_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.:_-]{0,252})")
MAX_SERVER_NAME = 253
# The uid of the Pod and Node objects sent to extenders: uuid5 over this namespace (fixed for this collection).
UID_NAMESPACE = uuid.UUID("6f0c2a4e-3b1d-5e8a-9c57-2d4b8e1f0a63")


class ExtenderError(Exception):
    """An extender could not be used: the message names it and says what went wrong (never the token)."""


class ExtenderConfig:
    """One parsed entry of a profile's ``extenders``. ``name`` is what errors and the result call it."""

    def __init__(self, index, url_prefix, filter_verb, prioritize_verb, weight, node_cache_capable, timeout,
                 ignorable, managed_resources, context, server_name, token, notes=()):
        self.index = index
        self.url_prefix = url_prefix
        self.filter_verb = filter_verb
        self.prioritize_verb = prioritize_verb
        self.weight = weight
        self.node_cache_capable = node_cache_capable
        self.timeout = timeout
        self.ignorable = ignorable
        self.managed_resources = managed_resources
        self.context = context              # the transport's TLS context (tls_context) for https, else None
        self.server_name = server_name
        self._token = token
        self.notes = notes                  # warnings every plan repeats (a bindVerb that is not called)
        self._heads = {}                    # verb -> request head, with the Content-Length left open
        self.name = "extender %s" % url_prefix

    def __repr__(self):
        # No token here: a repr may end up in a traceback or a log.
        return "ExtenderConfig(%r, filter=%r, prioritize=%r)" % (self.url_prefix, self.filter_verb, self.prioritize_verb)

    def scrub(self, text):
        """``text`` (str or bytes) with the bearer token blotted out (an answer may echo the request's headers): as it
        is, and as JSON writes it (Python's and Go's escapes). Scrub the whole text before cutting it to a length:
        cut first, a part of the token could be left."""
        if self._token:
            for form in self._token_forms(isinstance(text, bytes)):
                if form in text:
                    text = text.replace(form, b"********" if isinstance(text, bytes) else "********")
        return text

    def _token_forms(self, as_bytes):
        token = self._token
        escaped = json.dumps(token)[1:-1]
        go = escaped.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        forms = list(dict.fromkeys((token, escaped, go)))
        return [form.encode("ascii") for form in forms] if as_bytes else forms

    def request_head(self, verb, length):
        """The request line and headers of a POST of ``length`` bytes to ``urlPrefix/verb`` (bytes)."""
        head = self._heads.get(verb)
        if head is None:
            parts = urllib.parse.urlsplit(self.url_prefix.rstrip("/") + "/" + verb)
            host = parts.hostname if ":" not in parts.hostname else "[%s]" % parts.hostname
            if parts.port is not None:
                host = "%s:%d" % (host, parts.port)
            lines = ["POST %s HTTP/1.1" % (parts.path or "/"), "Host: " + host, "Content-Type: application/json",
                     "Accept: application/json", "Accept-Encoding: identity", "User-Agent: gangplank-scheduler"]
            if self._token:
                lines.append("Authorization: Bearer " + self._token)
            head = self._heads[verb] = ("\r\n".join(lines) + "\r\nContent-Length: ").encode("ascii")
        return head + b"%d\r\n\r\n" % length

    def snippet(self, data):
        """At most 80 characters of an answer, printable, token scrubbed (in the whole answer, before it is cut)."""
        text = self.scrub(bytes(data))[:400].decode("utf-8", "replace")
        return show(re.sub(r"[^\x20-\x7e]", "?", text))


def answer_decoder(config):
    """A function (verb, the body of a 2xx answer in bytes) -> its decoded JSON, for the answers of one round of calls
    (the transport brings the bytes back; plugins/extender.py reads them). Raises ExtenderError when an answer is not
    JSON, quoting it through ``snippet`` (the token blotted out first). An answer met again in the round is decoded
    once (_decode)."""
    kept = _Kept()

    def decode(verb, data):
        try:
            return _decode(data, kept)
        except (ValueError, RecursionError):
            raise ExtenderError("%s: the answer to %s is not JSON: %s" % (config.name, verb, config.snippet(data)))
    return decode


def _decode(data, kept):
    """The JSON of the answer ``data``. An answer byte for byte the same as one already decoded in this round is that
    one's value, not decoded again: an extender whose verdict does not depend on the Pod (a maintenance list) answers
    the services of one candidate list alike, and in the nodes mode each filter answer is a NodeList of up to every
    node. The readers (read_filter_result, read_priorities) never change what they read, so a value can be shared.
    ``kept`` (_Kept) finds an answer by its length first (no hash of a large body), and holds at most
    MAX_KEPT_ANSWER_BYTES of answers per round (so an answer is compared with at most that many bytes)."""
    same = kept.by_length.get(len(data))
    if same is not None:
        for earlier, value in same:
            if earlier == data:
                return value
    value = json.loads(data.decode("utf-8"))
    if len(data) <= kept.room:
        kept.room -= len(data)
        kept.by_length.setdefault(len(data), []).append((data, value))
    return value


class _Kept:
    """The answers of a round already decoded (_decode)."""

    __slots__ = ("by_length", "room")

    def __init__(self):
        self.by_length = {}             # length in bytes -> [(answer bytes, its decoded JSON)]
        self.room = MAX_KEPT_ANSWER_BYTES


class ExtenderFileError(Exception):
    """A token or PEM file, or the PEM data of tlsConfig, could not be used (raised by the transport's
    ``read_token_file`` and ``tls_context``): the message says what went wrong in a few words, never the content."""


class EncryptedKey(ExtenderFileError):
    """The client key is encrypted (pass-phrase protected)."""


class NotRegularFile(ExtenderFileError):
    """The file is not a regular file (a FIFO, a directory, a device or a socket)."""


# --- configuration ---------------------------------------------------------------------

def parse_extenders(reader, value, path, base=None, transport=None):
    """The ExtenderConfig list of a profile's ``extenders`` (``path``), mistakes recorded on ``reader``. ``transport``
    reads the token and PEM files and makes the TLS contexts (module docstring); needed only by an extender with an
    https:// urlPrefix or a bearerTokenFile (TypeError without it: a caller's mistake, not the profile's)."""
    configs = []
    seen = set()
    for index, item in enumerate(reader.sequence(value, path, MAX_EXTENDERS)):
        where = join_path(path, index)
        spec = reader.mapping(item, where, _KEYS, required=("urlPrefix",), optional_none=False)
        if not spec:
            continue
        config = _parse_one(reader, spec, where, index, base, transport)
        if config is None:
            continue
        if config.url_prefix in seen:
            reader.bad(join_path(where, "urlPrefix"), config.url_prefix, "a urlPrefix no other extender has")
            continue
        seen.add(config.url_prefix)
        configs.append(config)
    return configs


def _parse_one(reader, spec, where, index, base, transport):  # noqa: C901 (one check per field)
    errors = len(reader.errors)
    notes = []
    for key in ("bindVerb", "preemptVerb"):
        verb = spec.get(key)
        if verb is None or verb == "":
            continue
        if not _verb_ok(verb):
            reader.bad(join_path(where, key), verb, "a path segment such as bind (it is not called)")
        else:
            # Accepted as kube accepts it, so a kube configuration works unchanged, but never called.
            notes.append("extender %s: %s %s is not called: %s" % (
                spec.get("urlPrefix"), key, verb, "gangplank binds every instance itself" if key == "bindVerb"
                else "gangplank plans the gang at once, without kube's preemption"))
    url = reader.string(spec.get("urlPrefix"), join_path(where, "urlPrefix"), "an http:// or https:// URL")
    https = False
    host = None
    if url is not None:
        url = url.rstrip("/") or url
        parts, host, port = _url_parts(url)
        if parts is not None and (parts.username is not None or parts.password is not None):
            reader.error(join_path(where, "urlPrefix"), "has credentials in it (not shown); expected a URL without "
                                                        "user:password@, and the token in bearerToken")
            url = None
        elif parts is None and "@" in url:
            # Perhaps user:password@ in a URL that does not parse: not shown.
            reader.error(join_path(where, "urlPrefix"), "is not an http:// or https:// URL with a host (not shown: it "
                                                        "holds an @); expected a URL without user:password@")
            url = None
        elif parts is None or parts.scheme not in ("http", "https") or not host:
            reader.bad(join_path(where, "urlPrefix"), url, "an http:// or https:// URL with a host (and a port from 1 "
                                                           "to 65535 if any)")
            url = None
        elif port is not None and not 1 <= port <= 65535:
            reader.bad(join_path(where, "urlPrefix"), url, "a URL whose port is from 1 to 65535")
            url = None
        elif parts.query or parts.fragment:
            reader.bad(join_path(where, "urlPrefix"), url, "a URL without ?query or #fragment (the verb is appended)")
            url = None
        else:
            https = parts.scheme == "https"
    verbs = {}
    for key in ("filterVerb", "prioritizeVerb"):
        verb = spec.get(key)
        if verb is None or verb == "":
            verbs[key] = None
        elif not _verb_ok(verb):
            reader.bad(join_path(where, key), verb, "a path segment such as filter or prioritize (letters, digits, "
                                                    "- . _ ~ /; no . or .. segment, no line break or other control "
                                                    "character)")
        else:
            verbs[key] = verb
    if "filterVerb" in verbs and "prioritizeVerb" in verbs and not verbs["filterVerb"] and not verbs["prioritizeVerb"]:
        reader.error(where, "has neither filterVerb nor prioritizeVerb; expected at least one of them")
    weight = 1
    if spec.get("weight") is not None:
        # kube asks a positive weight only of an extender with a prioritizeVerb (its validation.go)
        weight = reader.integer(spec["weight"], join_path(where, "weight"),
                                minimum=1 if verbs.get("prioritizeVerb") else 0, maximum=MAX_WEIGHT)
    timeout = DEFAULT_HTTP_TIMEOUT
    if spec.get("httpTimeout") is not None:
        timeout = _duration(reader, spec["httpTimeout"], join_path(where, "httpTimeout"))
    flags = {key: reader.boolean(spec.get(key), join_path(where, key))
             for key in ("nodeCacheCapable", "ignorable", "enableHTTPS")}
    if flags["enableHTTPS"] and url is not None and not https:
        reader.bad(join_path(where, "urlPrefix"), url, "an https:// URL (enableHTTPS is true)")
    managed = []
    for position, entry in enumerate(reader.sequence(spec.get("managedResources"), join_path(where, "managedResources"))):
        at = join_path(join_path(where, "managedResources"), position)
        resource = reader.mapping(entry, at, ("name", "ignoredByScheduler"), required=("name",), optional_none=False)
        name = resource.get("name")
        if "name" in resource and not well_formed(name, _RESOURCE_NAME, MAX_RESOURCE_NAME):
            reader.bad(join_path(at, "name"), name, "a resource name such as nvidia.com/gpu")
        elif "name" in resource:
            managed.append(name)
        reader.boolean(resource.get("ignoredByScheduler"), join_path(at, "ignoredByScheduler"))
    context, server_name = None, None
    tls = spec.get("tlsConfig")
    if tls is not None and url is not None and not https:
        reader.error(join_path(where, "tlsConfig"), "is set for an http:// urlPrefix; expected an https:// URL")
    elif https:
        context, server_name = _tls(reader, tls, join_path(where, "tlsConfig"), base, transport)
    token = _token(reader, spec, where, base, transport)
    if token and url is not None and not https and not _loopback(host):
        reader.error(join_path(where, "urlPrefix"), "is http:// on another host with a bearer token; expected https:// "
                                                    "(the token would cross the network in clear text)")
    if len(reader.errors) > errors:
        return None
    return ExtenderConfig(index, url, verbs["filterVerb"], verbs["prioritizeVerb"], weight,
                          flags["nodeCacheCapable"], timeout, flags["ignorable"], tuple(managed), context,
                          server_name, token, tuple(notes))


def _duration(reader, value, path):
    """Seconds from kube's metav1.Duration text, as Go's time.ParseDuration reads it (``5s``, ``500ms``, ``1m30s``,
    ``.5s``, ``+2s``; units ns, us, µs, μs, ms, s, m, h; ``0`` alone), or from a number of seconds (gangplank's; kube
    takes text only). Zero means kube's default, DEFAULT_HTTP_TIMEOUT (NewHTTPExtender does the same); otherwise it
    must be above 0 and at most MAX_HTTP_TIMEOUT (kube has no upper bound; a negative one fails every call there)."""
    expected = "a duration above 0 and at most %gs, such as 5s or 500ms (Go's time.ParseDuration; 0 for the default " \
               "5s), or a number of seconds" % MAX_HTTP_TIMEOUT
    seconds = None
    if isinstance(value, bool):
        seconds = None
    elif isinstance(value, (int, float)):
        seconds = float(value) if abs(value) < 1e9 else None
    elif isinstance(value, str):
        match = well_formed(value, _DURATION, MAX_DURATION)
        if match and value.lstrip("+-") == "0":
            seconds = 0.0
        elif match:
            seconds = sum(float(amount) * _UNITS[unit]
                          for amount, unit in _DURATION_PART.findall(value))
            seconds = -seconds if value.startswith("-") else seconds
    if seconds == 0:
        return DEFAULT_HTTP_TIMEOUT
    if seconds is None or not 0 < seconds <= MAX_HTTP_TIMEOUT:
        reader.bad(path, value, expected)
        return None
    return seconds


def _verb_ok(verb):
    """Whether ``verb`` is a path below urlPrefix: whole-string match, no control character, no . or .. segment."""
    return well_formed(verb, _VERB, MAX_VERB) and not {".", ".."} & set(verb.split("/"))


def _url_parts(url):
    """(urlsplit's parts, host, port) of ``url``, or (None, None, None) when it is not an ASCII, printable URL without
    spaces that urllib can read: a bracket left open ("http://[::1") or a port that is not a number raises
    ValueError in urlsplit, in .hostname or in .port, and is an answer here, not a traceback."""
    # ASCII: the request line and Host header carry it as it is (a host in punycode, a path percent-encoded).
    if len(url) > 2048 or not url.isascii() or not url.isprintable() or " " in url:
        return None, None, None
    try:
        parts = urllib.parse.urlsplit(url)
        return parts, parts.hostname, parts.port
    except ValueError:
        return None, None, None


def _loopback(host):
    """Whether ``host`` (urlsplit's hostname: lower case, without brackets) is this machine for certain: the name
    localhost, or an IP address literal that is a loopback address (127.0.0.0/8, ::1). A name that only starts
    with "127." (127.evil.example, 127.0.0.1.nip.io) goes wherever DNS points, so it is not."""
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _file(base, name):
    return name if os.path.isabs(name) or base is None else os.path.join(base, name)


def _needs(transport, what):
    if transport is None:
        raise TypeError("an extender with %s needs a transport to read its files (extender/transport.py's HTTPTransport)"
                        % what)
    return transport


def _tls(reader, value, path, base, transport):
    """(TLS context, serverName) from tlsConfig (None: the system's CA certificates); the transport checks the files
    and makes the context. As in kube's TLSClientConfig, certData, keyData and caData (base64 of PEM bytes, Go's
    []byte in JSON) take precedence over the files."""
    transport = _needs(transport, "an https:// urlPrefix")
    spec = reader.mapping(value, path, _TLS_KEYS)
    pems, files = {}, {}                # "cert", "key", "ca" -> PEM text (from ...Data), a path (from ...File)
    for kind in ("cert", "key", "ca"):
        pem = _pem_data(reader, spec.get(kind + "Data"), join_path(path, kind + "Data"), kind + "File")
        if pem is not None:
            pems[kind] = pem
        elif spec.get(kind + "File") is not None and spec.get(kind + "Data") in (None, ""):
            where = join_path(path, kind + "File")
            name = spec[kind + "File"]
            # Not shown, as nothing under tlsConfig is. isfile: a regular file (a FIFO would wait for a writer).
            if not isinstance(name, str) or not name or has_control(name) or \
                    not transport.file_is_regular(_file(base, name)):
                reader.error(where, "is not an existing regular file (not shown)%s; expected the path of an existing "
                                    "PEM file" % _flaw(name))
            else:
                files[kind] = _file(base, name)
    given = {kind: spec.get(kind + "File") is not None or spec.get(kind + "Data") not in (None, "") for kind in ("cert", "key")}
    if given["cert"] != given["key"]:
        reader.error(path, "has only one of the client certificate (certFile or certData) and its key (keyFile or "
                           "keyData); expected both")
    server_name = None
    if spec.get("serverName") is not None:
        if well_formed(spec["serverName"], _SERVER_NAME, MAX_SERVER_NAME):
            server_name = spec["serverName"]
        else:
            reader.error(join_path(path, "serverName"), "is not a host name (not shown)%s; expected a DNS name or an IP "
                                                        "address, letters, digits, . - _ :" % _flaw(spec["serverName"]))
    insecure = reader.boolean(spec.get("insecure"), join_path(path, "insecure"))
    try:
        context = transport.tls_context(files, pems, insecure)
    except EncryptedKey:
        reader.error(join_path(path, "keyData" if "key" in pems else "keyFile"),
                     "cannot be used (not shown): the key is encrypted (pass-phrase protected); give an unencrypted key "
                     "(openssl pkey -in key.pem -out plain.pem)")
        return None, None
    except ExtenderFileError as error:
        reader.error(path, "cannot be used: %s; expected PEM (caFile or caData, certFile or certData with keyFile or "
                           "keyData)" % error)
        return None, None
    return context, server_name


def _secret_text(reader, value, path, expected):
    """The text of a secret value, or None with a mistake recorded that never shows the value. A vaulted value that no
    template has decrypted yet (ansible-core's EncryptedString; the older AnsibleVaultEncryptedUnicode is a str)
    decrypts through str(); anything else that is not a string is refused."""
    if isinstance(value, str):
        return value
    if type(value).__name__ not in _VAULTED:
        reader.error(path, "is a %s (not shown); expected %s" % (type(value).__name__, expected))
        return None
    try:
        return str(value)
    except Exception:  # noqa: BLE001 (whatever the vault raises, the message must not carry the value)
        reader.error(path, "could not be decrypted (not shown); expected %s, e.g. from a vaulted variable with its "
                           "vault password given" % expected)
        return None


def _pem_data(reader, value, path, file_key):
    """The PEM text of certData, keyData or caData (base64 of PEM bytes, as kube's JSON carries Go's []byte), or
    None (unset, or a mistake recorded). Never shown: keyData is a private key."""
    if value is None or value == "":
        return None
    value = _secret_text(reader, value, path, "base64 of PEM bytes")
    if value is None:
        return None
    if len(value) > MAX_TLS_DATA:
        reader.error(path, "is %d characters long (not shown); expected base64 of PEM bytes, at most %d characters"
                     % (len(value), MAX_TLS_DATA))
        return None
    if "-----BEGIN" in value:
        reader.error(path, "is PEM text (not shown); expected it base64-encoded, as kube's configuration carries "
                           "certData, keyData and caData (or the PEM in a file: %s)" % file_key)
        return None
    try:
        pem = binascii.a2b_base64("".join(value.split()).encode("ascii"), strict_mode=True).decode("ascii")
    except (ValueError, UnicodeError):
        reader.error(path, "is not base64 of PEM text (not shown); expected base64 of PEM bytes (base64 -w0 < file.pem)")
        return None
    if "-----BEGIN " not in pem or "-----END " not in pem:
        reader.error(path, "decodes to something that is not PEM (not shown); expected base64 of PEM bytes, which "
                           "begin with -----BEGIN")
        return None
    return pem


def _flaw(value):
    """What is wrong with a value that is not shown (a token, anything under tlsConfig), without showing it."""
    if not isinstance(value, str):
        return " (a %s)" % type(value).__name__
    if not value:
        return ": it is empty"
    if value[-1] in "\n\r\x85\u2028\u2029":
        return ": it ends in a line break"
    if has_control(value):
        return ": it holds a control character (a line break, a tab, a bidi or other format character)"
    return ""


def _token(reader, spec, where, base, transport):
    """The bearer token (bearerToken, or the content of bearerTokenFile), or None. Never shown.

    bearerTokenFile must be a regular file (a FIFO would wait for a writer for ever, a device could be read without
    end): the transport's read_token_file opens it without blocking and checks it before a byte is read, and reads at
    most MAX_TOKEN + 2 bytes.
    Its content is read as kube's client-go reads a token file: white space around it is dropped (strings.TrimSpace:
    the final line break an editor or ``echo`` leaves). A bearerToken is used as it is: one that ends in a line break
    or holds any other control character is refused (it would end the request's headers early)."""
    if spec.get("bearerToken") is not None and spec.get("bearerTokenFile") is not None:
        reader.error(where, "has bearerToken and bearerTokenFile; expected one of them")
        return None
    token = spec.get("bearerToken")
    path = join_path(where, "bearerToken")
    if spec.get("bearerTokenFile") is not None:
        path = join_path(where, "bearerTokenFile")
        name = reader.string(spec["bearerTokenFile"], path, "the path of a file holding the token")
        if name is None:
            return None
        reading = _needs(transport, "a bearerTokenFile")
        try:
            raw = reading.read_token_file(_file(base, name), MAX_TOKEN + 2)
            token = raw.decode("ascii").strip(" \t\n\v\f\r")
        except NotRegularFile:
            reader.bad(path, name, "a regular file holding the token (not a FIFO, a directory, a device or a socket)")
            return None
        except ExtenderFileError as error:
            reader.bad(path, name, "a readable file holding an ASCII token (%s)" % error)
            return None
        except UnicodeDecodeError as error:
            reader.bad(path, name, "a readable file holding an ASCII token (%s)" % str(error)[:200])
            return None
    if token is None:
        return None
    token = _secret_text(reader, token, path, "a string")
    if token is None:
        return None
    if not well_formed(token, _TOKEN, MAX_TOKEN):
        reader.error(path, "is not a usable token (not shown)%s; expected 1 to %d printable ASCII characters without "
                           "spaces" % (_flaw(token), MAX_TOKEN))
        return None
    return token


# --- kube objects --------------------------------------------------------------------------

def _cpu(millicores):
    return "%d" % (millicores // 1000) if millicores % 1000 == 0 else "%dm" % millicores


def _requests(service):
    """(requests, extended limits) of one container, as kube ResourceLists."""
    resources = service.resources
    requests = {"cpu": _cpu(resources.cpu), "memory": str(resources.memory)}
    extended = {}
    gpu = resources.gpu
    if gpu is not None:
        if gpu.memory is None:
            extended[GPU_RESOURCE] = str(gpu.count)
        else:
            extended[GPU_MEMORY_RESOURCE] = str(gpu.count * gpu.memory)
    if resources.nvme is not None:
        extended[NVME_RESOURCE] = str(resources.nvme.size)
    requests.update(extended)
    return requests, extended


def _container(service):
    requests, limits = _requests(service)
    container = {"name": service.name, "image": service.image or "", "resources": {"requests": requests}}
    if limits:
        container["resources"]["limits"] = dict(limits)     # extended resources: limits equal requests, as kube asks
    if service.ports:
        container["ports"] = [{"containerPort": port, "hostPort": port, "protocol": "TCP"} for port in service.ports]
    return container


def pod_object(problem, service):
    """The Pod an extender reads for ``service``: one container per member (the service, then its sidecars) with its
    requests, the node selector and tolerations, the priority, and gangplank's annotations (the GPU request's count,
    memory per device and models; the NVMe label)."""
    annotations = {ANNOTATION + "replicas": str(service.replicas)}
    gpu = service.resources.gpu
    if gpu is not None:
        annotations[ANNOTATION + "gpu-count"] = str(gpu.count)
        annotations[ANNOTATION + "gpu-memory-per-device"] = "" if gpu.memory is None else str(gpu.memory)
        annotations[ANNOTATION + "gpu-models"] = ",".join(gpu.models)
    if service.resources.nvme is not None:
        annotations[ANNOTATION + "nvme-label"] = service.resources.nvme.label
    for flag in ("stateful", "preemptible", "every_node"):
        if getattr(service, flag):
            annotations[ANNOTATION + flag.replace("_", "-")] = "true"
    spec = {"containers": [_container(member) for member in
                           [service] + [problem.services[name] for name in service.sidecars]],
            "schedulerName": "gangplank", "priority": service.priority}
    if service.node_selector:
        spec["nodeSelector"] = dict(service.node_selector)
    if service.tolerations:
        spec["tolerations"] = [_toleration(toleration) for toleration in service.tolerations]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": service.name, "namespace": NAMESPACE, "uid": object_uid("pod", service.name),
                         "labels": {"app.kubernetes.io/name": service.name, ANNOTATION + "service": service.name},
                         "annotations": annotations},
            "spec": spec, "status": {"phase": "Pending"}}


def object_uid(kind, name):
    """The ``metadata.uid`` of the Pod (``kind`` "pod", the service's name) or Node ("node", the node's name) sent to
    extenders: kube always sends one, and extenders key caches on it. A UUID (version 5) over UID_NAMESPACE and
    "<kind>/<name>": the same in every plan and on every controller, different for every object (a Pod and a Node of
    one name differ). A service or a node is one name in one problem; the problem does not name its site, so two
    sites' objects of one name share a uid (an extender serving two sites keys its cache on the site too)."""
    return str(uuid.uuid5(UID_NAMESPACE, "%s/%s" % (kind, name)))


def _toleration(toleration):
    item = {"key": toleration.key, "operator": "Exists" if toleration.value is None else "Equal"}
    if toleration.value is not None:
        item["value"] = toleration.value
    if toleration.effect is not None:
        item["effect"] = toleration.effect
    return item


def node_object(node):
    """The Node an extender reads: labels (the GFD-style labels the facts produce), taints, unschedulable, capacity
    and allocatable (CPU, memory, whole GPUs, GPU memory, NVMe space), the devices as annotations."""
    resources = {"cpu": _cpu(node.cpu), "memory": str(node.memory)}
    if node.gpus:
        resources[GPU_RESOURCE] = str(len(node.gpus))
        resources[GPU_MEMORY_RESOURCE] = str(sum(device.memory for device in node.gpus))
    if node.nvme:
        resources[NVME_RESOURCE] = str(sum(device.size for device in node.nvme))
    annotations = {}
    if node.gpus:
        annotations[ANNOTATION + "gpus"] = _annotation_json(
            [{"index": d.index, "uuid": d.uuid, "model": d.model, "memory": d.memory} for d in node.gpus])
    if node.nvme:
        annotations[ANNOTATION + "nvme"] = _annotation_json(
            [{"name": d.name, "size": d.size, "labels": list(d.labels)} for d in node.nvme])
    spec = {}
    if node.unschedulable:
        spec["unschedulable"] = True
    if node.taints:
        spec["taints"] = [dict({"key": taint.key, "effect": taint.effect},
                               **({} if taint.value is None else {"value": taint.value})) for taint in node.taints]
    metadata = {"name": node.name, "uid": object_uid("node", node.name), "labels": dict(node.labels)}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Node", "metadata": metadata, "spec": spec,
            "status": {"capacity": resources, "allocatable": dict(resources)}}


def resource_names(pod):
    """The resource names a Pod's containers request or limit (kube's IsInterested reads them)."""
    names = set()
    for container in pod["spec"]["containers"]:
        for part in ("requests", "limits"):
            names.update(container["resources"].get(part, {}))
    return names


# One encoder each, made once (the same output as json.dumps with these options, which makes a new JSONEncoder per
# call): a Node's JSON is built per node and plan, with up to two annotations each.
_annotation_json = json.JSONEncoder(separators=(",", ":")).encode
encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, sort_keys=True).encode


def args_body(pod_json, names, node_items, node_cache_capable):
    """kube's ExtenderArgs as bytes: ``Nodes`` (a NodeList) or, when nodeCacheCapable, ``NodeNames``; the other
    one null, as kube-scheduler sends it. ``pod_json`` (text) and ``node_items`` (UTF-8 bytes: the Node objects of
    ``names``, encoded and joined with commas) are encoded already, once per plan: the body is joined from them
    without encoding the NodeList again (a megabyte per service on 1,000 nodes)."""
    pod = pod_json.encode("utf-8")
    if node_cache_capable:
        return b"".join((b'{"Pod":', pod, b',"Nodes":null,"NodeNames":', encode(list(names)).encode("utf-8"), b"}"))
    return b"".join((b'{"Pod":', pod, b',"Nodes":{"apiVersion":"v1","kind":"NodeList","metadata":{},"items":[',
                     node_items, b']},"NodeNames":null}'))


# --- answers -------------------------------------------------------------------------------

def _fields(config, verb, value, what):
    """A JSON object's keys folded to lower case, as Go's encoding/json matches them."""
    if not isinstance(value, dict):
        raise ExtenderError("%s: the answer to %s is not %s: %s" % (config.name, verb, what, _shown(config, value)))
    return {key.lower(): item for key, item in value.items()}


# The keys of a Node and of its metadata as kube writes them: no two fold to the same lower case, so in an object
# whose keys are all among them, ``key`` is the only spelling of itself (_field).
_NODE_KEYS = frozenset(("apiVersion", "kind", "metadata", "spec", "status"))
_METADATA_KEYS = frozenset(("name", "generateName", "namespace", "uid", "resourceVersion", "generation",
                            "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
                            "annotations", "ownerReferences", "finalizers", "managedFields", "selfLink"))


_PRIORITY_KEYS = frozenset(("Host", "Score"))


def _field(config, verb, value, key, usual, what):
    """``_fields(...).get(key)`` (``key`` lower case), without folding every key when they are all ``usual`` ones
    (the Node objects of a NodeList answer: a thousand of them per answer on a large cluster)."""
    if isinstance(value, dict) and value.keys() <= usual:
        return value.get(key)
    return _fields(config, verb, value, what).get(key)


def _shown(config, value):
    """A part of an answer as an error quotes it: the token scrubbed from every string of it first, then shown (at
    most messages.SHOW_LIMIT characters; show escapes line breaks, bidi controls and lone surrogates)."""
    return show(_scrubbed(config, value, [SHOW_LIMIT + 1], 0))


def _scrubbed(config, value, budget, depth):
    """``value`` with the token scrubbed from its strings and keys, as far as show can render it: show writes at
    least one character per value, so only the first ``budget`` values (in show's order) are copied."""
    budget[0] -= 1
    if isinstance(value, str):
        return config.scrub(value)
    if budget[0] <= 0 or depth > 21:
        return "..." if isinstance(value, (list, dict)) else value
    if isinstance(value, list):
        items = []
        for item in value:
            if budget[0] <= 0:
                break
            items.append(_scrubbed(config, item, budget, depth + 1))
        return items
    if isinstance(value, dict):
        keys = list(value) if len(value) > 1000 or not all(isinstance(key, str) for key in value) else sorted(value)
        copy = {}
        for key in keys:
            if budget[0] <= 0:
                break
            copy[_scrubbed(config, key, budget, depth + 1)] = _scrubbed(config, value[key], budget, depth + 1)
        return copy
    return value


def read_filter_result(config, verb, answer, sent):
    """(names that pass, {name: reason} of those that do not) from an ExtenderFilterResult; every node sent that
    is in neither answer is filtered out too, as kube does. Raises ExtenderError on anything else."""
    fields = _fields(config, verb, answer, "an ExtenderFilterResult object")
    error = fields.get("error")
    if error not in (None, ""):
        if not isinstance(error, str):
            raise ExtenderError("%s: Error in the answer to %s is not a string: %s" % (config.name, verb, _shown(config, error)))
        raise ExtenderError("%s: %s answered with an error: %s" % (config.name, verb, _shown(config, error)))
    passed = []
    names = fields.get("nodenames")
    nodes = fields.get("nodes")
    # kube reads NodeNames only from a nodeCacheCapable extender; here also when Nodes is missing (an extender that
    # always answers with names), where kube would pass no node at all.
    if names is not None and (config.node_cache_capable or nodes is None):
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            raise ExtenderError("%s: NodeNames in the answer to %s is not a list of names: %s"
                                % (config.name, verb, _shown(config, names)))
        passed = names
    elif nodes is not None:
        items = _fields(config, verb, nodes, "a NodeList in Nodes").get("items")
        if items is None:
            items = []
        if not isinstance(items, list):
            raise ExtenderError("%s: Nodes.items in the answer to %s is not a list" % (config.name, verb))
        for item in items:
            metadata = _field(config, verb, item, "metadata", _NODE_KEYS, "a Node in Nodes.items")
            name = None if metadata is None else _field(config, verb, metadata, "name", _METADATA_KEYS,
                                                        "a Node's metadata")
            if not isinstance(name, str):
                raise ExtenderError("%s: a Node in the answer to %s has no metadata.name: %s"
                                    % (config.name, verb, _shown(config, item)))
            passed.append(name)
    unknown = sorted(name for name in passed if name not in sent)
    if unknown:
        raise ExtenderError("%s: the answer to %s names node(s) it was not asked about: %s"
                            % (config.name, verb, _shown(config, unknown)))
    failed = {}
    for key in ("failedandunresolvablenodes", "failednodes"):
        entries = fields.get(key)
        if entries is None:
            continue
        label = "FailedAndUnresolvableNodes" if key.startswith("failedand") else "FailedNodes"
        if not isinstance(entries, dict) or not all(isinstance(reason, str) for reason in entries.values()):
            raise ExtenderError("%s: %s in the answer to %s is not a mapping of node name to reason: %s"
                                % (config.name, label, verb, _shown(config, entries)))
        unknown = sorted(name for name in entries if name not in sent)
        if unknown:
            raise ExtenderError("%s: %s in the answer to %s names node(s) it was not asked about: %s"
                                % (config.name, label, verb, _shown(config, unknown)))
        for name, reason in entries.items():
            # FailedAndUnresolvableNodes takes precedence, as in kube (it is read first).
            failed.setdefault(name, _reason(config, reason))
    both = sorted(set(passed) & set(failed))
    if both:
        raise ExtenderError("%s: the answer to %s both passes and fails node(s): %s"
                            % (config.name, verb, _shown(config, both)))
    return frozenset(passed), failed


def _reason(config, text):
    """A FailedNodes reason as the "0/N nodes are available" line shows it: the token scrubbed (first, in the whole
    text), white space folded, then one line (validation.one_line: a line break, a bidi control such as U+202E or a
    lone surrogate becomes U+FFFD), at most MAX_REASON characters."""
    text = re.sub(r"\s+", " ", config.scrub(text)).strip()
    text = one_line(text, MAX_REASON)
    return text or "node(s) didn't pass %s" % config.name


def read_priorities(config, verb, answer, sent, warnings):
    """{name: score 0..10} from a HostPriorityList (null: no scores). Scores outside 0..10 are clamped, with a
    warning; anything else raises ExtenderError."""
    if answer is None:
        return {}
    if not isinstance(answer, list):
        raise ExtenderError("%s: the answer to %s is not a HostPriorityList (a list): %s"
                            % (config.name, verb, _shown(config, answer)))
    scores = {}
    for item in answer:
        # kube's own spellings (Host, Score) read as they are: folding every key costs more than the rest of the read.
        if isinstance(item, dict) and item.keys() <= _PRIORITY_KEYS:
            host, score = item.get("Host"), item.get("Score")
        else:
            fields = _fields(config, verb, item, "a HostPriority object")
            host, score = fields.get("host"), fields.get("score")
        if not isinstance(host, str) or isinstance(score, bool) or not isinstance(score, (int, float)) or \
                (isinstance(score, float) and not score.is_integer()):
            raise ExtenderError("%s: the answer to %s has an entry that is not {Host: name, Score: integer}: %s"
                                % (config.name, verb, _shown(config, item)))
        if host not in sent:
            raise ExtenderError("%s: the answer to %s scores a node it was not asked about: %s"
                                % (config.name, verb, _shown(config, host)))
        if host in scores:
            raise ExtenderError("%s: the answer to %s scores node %s twice" % (config.name, verb, _shown(config, host)))
        score = int(score)
        if not 0 <= score <= MAX_EXTENDER_PRIORITY:
            warnings.append("%s: %s scored node %s %d; scores are 0..%d (kube's MaxExtenderPriority), so it counts as %d"
                            % (config.name, verb, host, score, MAX_EXTENDER_PRIORITY,
                               min(max(score, 0), MAX_EXTENDER_PRIORITY)))
            score = min(max(score, 0), MAX_EXTENDER_PRIORITY)
        scores[host] = score
    return scores
