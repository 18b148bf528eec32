# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An extender's configuration (scheduler/extender.py, parse_extenders), the Pod and Node objects sent, and what is
read back from answers: every field checked whole, no value that could be a secret quoted, no file read that is not
a regular file, nothing from an answer shown that could break a line, and every-node services under an extender's
verdict. Extenders here are real servers on loopback (test_extender.PythonExtender)."""

from __future__ import annotations

import copy
import json
import os
import ssl
import subprocess
import sys
import tempfile
import threading
import uuid

import pytest

from ansible_collections.gangplank.platform.plugins.filter.plan_table import plan_table
from ansible_collections.gangplank.platform.plugins.module_utils.planning.placement_html import render_html
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import exact
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import extender as wire
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.extender import ExtenderError
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.extender import every_node_left_out
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import ProblemError, parse_problem
from ansible_collections.gangplank.platform.plugins.module_utils.extender.transport import parse_profile
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.rebalance import rebalance
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.report import render_table
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import framework_for, plan
from ansible_collections.gangplank.platform.plugins.module_utils.validation import has_control
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.plan_checker import check_plan
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.test_extender import (
    PythonExtender, maintenance, refused_by,
)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(HERE)))))
PLANNER = os.path.join(ROOT, "bin", "gangplank-plan")
URL = "http://127.0.0.1:9/ext"
SECRET = "s3cretT0kenValue"
# A line break at the end, and the other control characters a YAML block scalar, a file or a paste may carry.
CONTROLS = ["\n", "\r", "\t", "\x00", "\x85", "\u2028", "\u202e", "\ud800"]
TOKEN_FILE = os.path.join(tempfile.mkdtemp(prefix="gangplank-token-"), "token")
with open(TOKEN_FILE, "w", encoding="ascii") as _stream:
    _stream.write(SECRET + "\n")
CA_FILE = ssl.get_default_verify_paths().openssl_cafile


@pytest.fixture
def servers():
    started = []

    def start(behave, protocol="HTTP/1.0"):
        server = PythonExtender(behave, protocol=protocol)
        started.append(server)
        return server
    yield start
    for server in started:
        server.close()


def errors_of(data, base=None):
    with pytest.raises(ProblemError) as raised:
        parse_profile(data, base)
    return raised.value.errors


def entry_errors(entry, base=None):
    return errors_of({"extenders": [entry]}, base)


def config_of(entry):
    [cls] = [cls for cls in parse_profile({"extenders": [entry]}).plugins if getattr(cls, "config", None)]
    return cls.config


# --- bearerTokenFile: a regular file only ------------------------------------------------------------

@pytest.mark.parametrize("kind", ["fifo", "link to a fifo", "directory", "device"])
def test_a_token_file_that_is_not_a_regular_file_is_refused_without_waiting(tmp_path, kind):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(fifo)
    path = {"fifo": fifo, "link to a fifo": link, "directory": tmp_path, "device": "/dev/zero"}[kind]
    found = {}

    def parse():
        try:
            parse_profile({"extenders": [{"urlPrefix": URL, "filterVerb": "f", "bearerTokenFile": str(path)}]})
        except ProblemError as error:
            found["errors"] = error.errors
        except Exception as error:  # noqa: BLE001 (the test reports it)
            found["raised"] = error
    thread = threading.Thread(target=parse, daemon=True)
    thread.start()
    thread.join(20)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))     # let the waiting reader go
        thread.join(5)
        pytest.fail("reading bearerTokenFile (%s) waited for a writer" % kind)
    assert "raised" not in found, found
    [(path_, message)] = found["errors"]
    assert path_ == "profile.extenders[0].bearerTokenFile"
    assert "a regular file" in message


@pytest.mark.parametrize("content, token", [("tok-en\n", "tok-en"), ("tok-en\r\n", "tok-en"), ("  tok-en \n\n", "tok-en")])
def test_a_token_file_loses_the_white_space_around_it_as_kubes_client_reads_it(tmp_path, content, token):
    (tmp_path / "t").write_bytes(content.encode())
    config = config_of({"urlPrefix": URL, "filterVerb": "f", "bearerTokenFile": str(tmp_path / "t")})
    assert config._token == token


@pytest.mark.parametrize("control", CONTROLS)
def test_a_token_file_with_a_control_character_inside_is_refused_unshown(tmp_path, control):
    (tmp_path / "t").write_bytes((SECRET[:8] + control + SECRET[8:]).encode("utf-8", "surrogatepass"))
    errors = entry_errors({"urlPrefix": URL, "filterVerb": "f", "bearerTokenFile": str(tmp_path / "t")})
    assert [path for path, _message in errors] == ["profile.extenders[0].bearerTokenFile"]
    assert SECRET[:8] not in str(errors) and SECRET[8:] not in str(errors)


def test_a_token_file_too_large_is_read_only_to_its_bound(tmp_path):
    (tmp_path / "t").write_bytes(b"a" * (wire.MAX_TOKEN * 4))
    errors = entry_errors({"urlPrefix": URL, "filterVerb": "f", "bearerTokenFile": str(tmp_path / "t")})
    assert errors[0][0] == "profile.extenders[0].bearerTokenFile" and "not a usable token" in errors[0][1]


# --- urlPrefix ------------------------------------------------------------------------------------

@pytest.mark.parametrize("url", ["http://[::1", "http://[::1]:99999/x", "http://h:abc/", "http://[zz]/", "http://h:0/x",
                                 "https://h:0", "http://[::1]:0/", "https://h:65536", "http://h:-1/"])
def test_a_url_urllib_cannot_read_or_with_port_0_is_an_error_at_its_path(url):
    errors = entry_errors({"urlPrefix": url, "filterVerb": "f"})
    assert [path for path, _message in errors] == ["profile.extenders[0].urlPrefix"], errors


@pytest.mark.parametrize("url", ["http://u:pw@[::1", "http://u:hunter2@h:0/"])
def test_credentials_in_a_url_that_does_not_parse_are_not_shown(url):
    errors = entry_errors({"urlPrefix": url, "filterVerb": "f"})
    assert [path for path, _message in errors] == ["profile.extenders[0].urlPrefix"]
    assert "hunter2" not in str(errors) and "pw" not in errors[0][1]


@pytest.mark.parametrize("host", ["127.evil.example", "127.0.0.1.nip.io", "10.0.0.5", "localhost.evil.example",
                                  "127.0.0.1.", "[::ffff:10.0.0.1]", "0x7f.1", "127.1", "evil-localhost"])
def test_a_token_over_http_goes_only_to_a_loopback_address(host):
    errors = entry_errors({"urlPrefix": "http://%s:8080/ext" % host, "filterVerb": "f", "bearerToken": SECRET})
    assert errors[0][0] == "profile.extenders[0].urlPrefix" and "in clear text" in errors[0][1]
    assert SECRET not in str(errors)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "[::1]", "localhost", "LOCALHOST"])
def test_a_token_over_http_to_loopback_is_accepted(host):
    assert config_of({"urlPrefix": "http://%s:8080/ext" % host, "filterVerb": "f", "bearerToken": SECRET})._token == SECRET


# --- every validated field, whole -----------------------------------------------------------------

def _extender(**fields):
    return {"extenders": [dict({"urlPrefix": URL, "filterVerb": "filter"}, **fields)]}


# field path -> (profile with the bad text in that field, whether the field's value is never shown)
FIELDS = {
    "profile.extenders[0].urlPrefix": (lambda bad: _extender(urlPrefix=URL + bad), False),
    "profile.extenders[0].filterVerb": (lambda bad: _extender(filterVerb="filter" + bad), False),
    "profile.extenders[0].prioritizeVerb": (lambda bad: _extender(prioritizeVerb="prioritize" + bad), False),
    "profile.extenders[0].bindVerb": (lambda bad: _extender(bindVerb="bind" + bad), False),
    "profile.extenders[0].preemptVerb": (lambda bad: _extender(preemptVerb="preempt" + bad), False),
    "profile.extenders[0].httpTimeout": (lambda bad: _extender(httpTimeout="5s" + bad), False),
    "profile.extenders[0].managedResources[0].name":
        (lambda bad: _extender(managedResources=[{"name": "nvidia.com/gpu" + bad}]), False),
    "profile.extenders[0].bearerToken": (lambda bad: _extender(bearerToken=SECRET + bad), True),
    "profile.extenders[0].bearerTokenFile": (lambda bad: _extender(bearerTokenFile=TOKEN_FILE + bad), False),
    "profile.extenders[0].tlsConfig.serverName":
        (lambda bad: _extender(urlPrefix="https://127.0.0.1:9/ext", tlsConfig={"serverName": "ext.example" + bad}), True),
    "profile.extenders[0].tlsConfig.caFile":
        (lambda bad: _extender(urlPrefix="https://127.0.0.1:9/ext", tlsConfig={"caFile": CA_FILE + bad}), True),
    "profile.user_plugins[0]": (lambda bad: {"user_plugins": [os.path.join(ROOT, "docs", "examples", "image_affinity.py")
                                                              + bad],
                                             "plugins": {"score": {"enabled": [{"name": "ImageAffinity", "weight": 1}]}}},
                                False),
    "profile.plugins.filter.disabled[0]": (lambda bad: {"plugins": {"filter": {"disabled": ["NodeSelector" + bad]}}},
                                           False),
    "profile.plugins.score.enabled[0].name":
        (lambda bad: {"plugins": {"score": {"enabled": [{"name": "NodeResourcesFit" + bad, "weight": 1}]}}}, False),
    "profile.plugin_config.NodeResourcesFit.strategy":
        (lambda bad: {"plugin_config": {"NodeResourcesFit": {"strategy": "LeastAllocated" + bad}}}, False),
}


@pytest.mark.parametrize("control", CONTROLS)
@pytest.mark.parametrize("where", ["end", "middle"])
@pytest.mark.parametrize("field", sorted(FIELDS))
def test_every_field_refuses_a_line_break_or_control_character(field, where, control):
    """A trailing newline (a YAML block scalar, a vaulted value read from a file) and the other control characters:
    refused at the field's path, whole-string checks only; a secret field's value is never quoted."""
    build, secret = FIELDS[field]
    good = parse_profile(build(""))                     # the same profile without it is valid
    assert good is not None
    data = build(control)
    if where == "middle":
        data = json.loads(json.dumps(build("\u0000")).replace("\\u0000", json.dumps(control)[1:-1] + "x"))
    errors = errors_of(data)
    assert field in [path for path, _message in errors], errors
    if secret:
        for _path, message in errors:
            assert SECRET not in message and "ext.example" not in message, message
            assert CA_FILE not in message


def test_a_dot_dot_verb_with_a_line_break_is_refused():
    for verb in ("..\n", "..", "a/../b", ".", "a/./b", "../admin\n"):
        errors = entry_errors({"urlPrefix": URL, "filterVerb": verb})
        assert [path for path, _message in errors] == ["profile.extenders[0].filterVerb"], verb


@pytest.mark.parametrize("ending, said", [("\n", "ends in a line break"), ("\r", "ends in a line break"),
                                          ("\u2028", "ends in a line break"), ("\t", "control character"),
                                          ("\x00x", "control character")])
def test_a_token_with_a_line_break_names_the_path_and_says_so_unquoted(ending, said):
    [(path, message)] = entry_errors({"urlPrefix": URL, "filterVerb": "f", "bearerToken": SECRET + ending})
    assert path == "profile.extenders[0].bearerToken"
    assert said in message and SECRET not in message and "not shown" in message


def test_a_managed_resource_with_a_final_newline_is_refused_not_silently_unmatched():
    [(path, _message)] = entry_errors({"urlPrefix": URL, "filterVerb": "f",
                                       "managedResources": [{"name": "nvidia.com/gpu\n"}]})
    assert path == "profile.extenders[0].managedResources[0].name"
    assert config_of({"urlPrefix": URL, "filterVerb": "f",
                      "managedResources": [{"name": "nvidia.com/gpu"}]}).managed_resources == ("nvidia.com/gpu",)


@pytest.mark.parametrize("text", ["5s\n", "5s\r", "1m\u2028", "\n5s"])
def test_a_duration_with_a_line_break_is_refused(text):
    [(path, _message)] = entry_errors({"urlPrefix": URL, "filterVerb": "f", "httpTimeout": text})
    assert path == "profile.extenders[0].httpTimeout"


# --- an encrypted client key -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def encrypted_pki(tmp_path_factory):
    crypto = pytest.importorskip("cryptography")
    del crypto
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    folder = tmp_path_factory.mktemp("encrypted")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "client")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.BestAvailableEncryption(b"pass phrase")))
    (folder / "plain.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption()))
    return folder


def _tls_entry(folder, as_data):
    if as_data:
        import base64
        tls = {"certData": base64.b64encode((folder / "cert.pem").read_bytes()).decode(),
               "keyData": base64.b64encode((folder / "key.pem").read_bytes()).decode()}
    else:
        tls = {"certFile": str(folder / "cert.pem"), "keyFile": str(folder / "key.pem")}
    return {"urlPrefix": "https://127.0.0.1:9/ext", "filterVerb": "f", "tlsConfig": tls}


@pytest.mark.parametrize("as_data", [False, True])
def test_an_encrypted_client_key_is_refused_without_a_prompt(encrypted_pki, as_data, monkeypatch):
    passwords = []
    original = ssl.SSLContext.load_cert_chain

    def spy(self, certfile, keyfile=None, password=None):
        passwords.append(password)
        return original(self, certfile, keyfile, password)
    monkeypatch.setattr(ssl.SSLContext, "load_cert_chain", spy)
    [(path, message)] = entry_errors(_tls_entry(encrypted_pki, as_data))
    assert path == "profile.extenders[0].tlsConfig." + ("keyData" if as_data else "keyFile")
    assert "the key is encrypted (pass-phrase protected); give an unencrypted key" in message
    # OpenSSL prompts only when no password callback is given: one is, every time.
    assert passwords and all(callable(password) for password in passwords)


def test_an_encrypted_client_key_never_waits_on_a_terminal(encrypted_pki):
    """In a process of its own session (no controlling terminal) and with no standard input: the same error, at
    once, and nothing written asking for a pass phrase."""
    code = ("import json, sys\n"
            "from ansible_collections.gangplank.platform.plugins.module_utils.extender.transport import parse_profile\n"
            "from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import ProblemError\n"
            "try:\n    parse_profile({'extenders': [json.loads(sys.argv[1])]})\n"
            "except ProblemError as error:\n    print(json.dumps(error.errors))\n")
    done = subprocess.run([sys.executable, "-c", code, json.dumps(_tls_entry(encrypted_pki, False))],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, start_new_session=True,
                          env=dict(os.environ), check=False)
    assert done.returncode == 0, done.stderr
    assert "pass phrase" not in done.stderr.lower()
    [[path, message]] = json.loads(done.stdout)
    assert path.endswith("tlsConfig.keyFile") and "the key is encrypted" in message


def test_an_unencrypted_key_still_loads(encrypted_pki):
    entry = _tls_entry(encrypted_pki, False)
    entry["tlsConfig"]["keyFile"] = str(encrypted_pki / "plain.pem")
    assert config_of(entry).context is not None


# --- answers: what is shown -----------------------------------------------------------------------

TOKEN46 = "Zq8Xw2Lk9Pv4Rt6Ym1Nb3Hc5Jd7Fg0Ks2Ua4We6Io8TyQm"


def _no_run_of(token, text):
    return [token[start:start + 4] for start in range(len(token) - 3) if token[start:start + 4] in text]


def test_token_is_scrubbed_before_an_answer_is_cut():
    assert len(TOKEN46) == 46
    config = config_of({"urlPrefix": URL, "filterVerb": "f", "prioritizeVerb": "p", "bearerToken": TOKEN46})
    around = "x" * 40 + TOKEN46 + "y" * 40             # the 80-character cut falls inside the token
    bad = [
        lambda: wire.read_filter_result(config, "f", {"Error": around}, {"n0"}),
        lambda: wire.read_filter_result(config, "f", {"Error": [around]}, {"n0"}),
        lambda: wire.read_filter_result(config, "f", {"NodeNames": [around]}, {"n0"}),
        lambda: wire.read_filter_result(config, "f", {"NodeNames": ["x" * 30, around]}, {"n0"}),
        lambda: wire.read_filter_result(config, "f", {"FailedNodes": {around: "r"}}, {"n0"}),
        lambda: wire.read_filter_result(config, "f", {"FailedNodes": {"n0": 5, "k": around}}, {"n0"}),
        lambda: wire.read_filter_result(config, "f", {"Nodes": {"items": [{"metadata": {"x": around}}]}}, {"n0"}),
        lambda: wire.read_priorities(config, "p", {"x": around}, {"n0"}, []),
        lambda: wire.read_priorities(config, "p", [{"Host": around, "Score": 1}], {"n0"}, []),
        lambda: wire.read_priorities(config, "p", [{"Host": "n0", "Score": around}], {"n0"}, []),
    ]
    for read in bad:
        with pytest.raises(ExtenderError) as raised:
            read()
        assert _no_run_of(TOKEN46, str(raised.value)) == [], str(raised.value)
    for data in (around.encode(), b"z" * 360 + TOKEN46.encode() * 3, b'{"echo": "%s"}' % TOKEN46.encode()):
        assert _no_run_of(TOKEN46, config.snippet(data)) == []
    # A reason quoting the token: scrubbed before it is cut to MAX_REASON.
    _passed, failed = wire.read_filter_result(config, "f", {"NodeNames": [], "FailedNodes": {
        "n0": "z" * (wire.MAX_REASON - 20) + TOKEN46}}, {"n0"})
    assert _no_run_of(TOKEN46, failed["n0"]) == []


def test_a_long_token_or_one_that_json_escapes_is_scrubbed_too():
    long_token = "L" + "0123456789abcdef" * 40
    config = config_of({"urlPrefix": URL, "filterVerb": "f", "bearerToken": long_token})
    assert long_token[:40] not in config.snippet(long_token.encode() + b"tail")
    quoted = 'ab"cd\\ef<gh>ij&kl' + TOKEN46
    config = config_of({"urlPrefix": URL, "filterVerb": "f", "bearerToken": quoted})
    with pytest.raises(ExtenderError) as raised:
        wire.read_filter_result(config, "f", {"Error": "e " + quoted}, {"n0"})
    assert _no_run_of(TOKEN46, str(raised.value)) == []
    go_escaped = json.dumps(quoted)[1:-1].replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    assert _no_run_of(TOKEN46, config.snippet(b'{"Error": "%s"}' % go_escaped.encode())) == []


HOSTILE_REASONS = {"n0": "bad \ud800 surrogate", "n1": "\u202e2 nodes are fine\u202c really", "n2": "line\nbreak\r\x00",
                   "n3": "\x85next\u2028line\u2029para\u200b"}


def test_reasons_are_one_safe_line():
    config = config_of({"urlPrefix": URL, "filterVerb": "f"})
    _passed, failed = wire.read_filter_result(config, "f", {"NodeNames": [], "FailedNodes": HOSTILE_REASONS},
                                              set(HOSTILE_REASONS))
    for reason in failed.values():
        assert not has_control(reason), repr(reason)
        reason.encode("utf-8")
        assert len(reason) <= wire.MAX_REASON


def _hostile(verb, args, _headers, _handler):
    names = [item["metadata"]["name"] for item in args["Nodes"]["items"]] if args.get("Nodes") else args["NodeNames"]
    return 200, json.dumps({"NodeNames": [], "FailedNodes": {name: HOSTILE_REASONS["n%d" % (index % 4)]
                                                             for index, name in enumerate(names)}}).encode()


def _cluster():
    return {"nodes": {"n%d" % index: {"cpu": 4, "memory": "16Gi"} for index in range(4)},
            "services": {"api": {"resources": {"cpu": 1, "memory": "1Gi"}}}}


def test_hostile_reasons_reach_the_table_and_the_page_without_breaking_them(servers):
    server = servers(_hostile)
    result = plan(_cluster(), exact_seconds=0, profile=parse_profile({"extenders": [
        {"urlPrefix": server.url, "filterVerb": "filter"}]}))
    assert result["feasible"] is False
    [message] = result["unschedulable"].values()
    assert message.startswith("0/4 nodes are available: ") and not has_control(message), message
    for text in (render_table(result), "\n".join(plan_table(result)), render_html(result),
                 json.dumps(result, ensure_ascii=False)):
        text.encode("utf-8")
        assert "\u202e" not in text and "\ud800" not in text


def test_hostile_reasons_through_the_command_line_and_html(servers, tmp_path):
    server = servers(_hostile)
    (tmp_path / "problem.json").write_text(json.dumps(_cluster()))
    (tmp_path / "profile.json").write_text(json.dumps({"extenders": [{"urlPrefix": server.url, "filterVerb": "filter"}]}))
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["PYTHONIOENCODING"] = "utf-8"
    done = subprocess.run([PLANNER, str(tmp_path / "problem.json"), "--profile", str(tmp_path / "profile.json"),
                           "--html", str(tmp_path / "out.html"), "--exact-timeout", "0"],
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "0/4 nodes are available" in done.stdout
    page = (tmp_path / "out.html").read_text(encoding="utf-8")
    assert "\u202e" not in page and "\u202e" not in done.stdout


# --- metadata.uid ---------------------------------------------------------------------------------

def test_pods_and_nodes_have_a_stable_distinct_uuid_as_uid():
    problem = parse_problem({"nodes": {"api": {"cpu": 4, "memory": "16Gi"}, "n1": {"cpu": 4, "memory": "16Gi"}},
                             "services": {"api": {"resources": {"cpu": 1, "memory": "1Gi"}},
                                          "web": {"resources": {"cpu": 1, "memory": "1Gi"}}}})
    uids = [wire.pod_object(problem, service)["metadata"]["uid"] for service in problem.services.values()]
    uids += [wire.node_object(node)["metadata"]["uid"] for node in problem.nodes.values()]
    assert len(set(uids)) == 4                      # a Pod and a Node of one name ("api") differ too
    for uid in uids:
        assert uuid.UUID(uid).version == 5 and str(uuid.UUID(uid)) == uid
    # The same in every plan, on every controller and in every release: derived, never random.
    assert wire.pod_object(problem, problem.services["api"])["metadata"]["uid"] == \
        str(uuid.uuid5(uuid.UUID("6f0c2a4e-3b1d-5e8a-9c57-2d4b8e1f0a63"), "pod/api"))
    assert wire.node_object(problem.nodes["n1"])["metadata"]["uid"] == \
        str(uuid.uuid5(uuid.UUID("6f0c2a4e-3b1d-5e8a-9c57-2d4b8e1f0a63"), "node/n1"))


@pytest.mark.parametrize("cache", [False, True])
def test_the_objects_sent_carry_their_uid(servers, cache):
    server = servers(maintenance(set()))
    plan(_cluster(), exact_seconds=0, profile=parse_profile({"extenders": [
        {"urlPrefix": server.url, "filterVerb": "filter", "nodeCacheCapable": cache}]}))
    [(_verb, _headers, args)] = server.requests
    assert args["Pod"]["metadata"]["uid"] == wire.object_uid("pod", "api")
    if not cache:
        assert [item["metadata"]["uid"] for item in args["Nodes"]["items"]] == \
            [wire.object_uid("node", "n%d" % index) for index in range(4)]


# --- every-node services under an extender's verdict ------------------------------------------------

def _daemon_problem():
    return {"nodes": {"node-%s" % name: {"cpu": 4, "memory": "16Gi"} for name in "abcd"},
            "services": {"agent": {"every_node": True, "resources": {"cpu": 0.5, "memory": "256Mi"}},
                         "api": {"replicas": 2, "resources": {"cpu": 1, "memory": "1Gi"}}}}


@pytest.mark.parametrize("cache", [False, True])
def test_a_node_an_extender_refuses_gets_no_every_node_instance(servers, cache):
    """kube leaves the DaemonSet pod of a refused node pending; here that node gets no instance of the every-node
    service, the rest of the plan goes on, and the result names it (left_out, a warning)."""
    server = servers(maintenance({"node-a"}))
    problem = _daemon_problem()
    result = plan(copy.deepcopy(problem), exact_seconds=2.0, profile=parse_profile({"extenders": [
        {"urlPrefix": server.url, "filterVerb": "filter", "nodeCacheCapable": cache}]}))
    assert result["feasible"] is True, result.get("unschedulable")
    assert sorted(name for name in result["placements"] if name.startswith("agent@")) == \
        ["agent@node-b", "agent@node-c", "agent@node-d"]
    assert list(result["left_out"]) == ["agent@node-a"]
    assert "node-a" in result["left_out"]["agent@node-a"] and "maintenance" in result["left_out"]["agent@node-a"]
    assert any("agent" in warning and "node-a" in warning for warning in result["warnings"])
    refused = {"agent": {"node-a"}, "api": {"node-a"}}
    assert check_plan(copy.deepcopy(problem), result, refused=refused) + refused_by(result, refused) == []
    # The checker holds the scheduler to it: a left-out instance nobody refused, or one missing, is a violation.
    assert check_plan(copy.deepcopy(problem), result) != []
    assert check_plan(copy.deepcopy(problem), dict(result, left_out={}), refused=refused) != []
    asked = server.verbs()
    assert len(asked) == len(set(asked)), asked


def test_the_exact_solver_and_a_rebalance_agree(servers):
    if not exact.available():
        pytest.skip("the exact solver needs OR-Tools")
    server = servers(maintenance({"node-a"}))
    profile = parse_profile({"extenders": [{"urlPrefix": server.url, "filterVerb": "filter", "nodeCacheCapable": True}]})
    problem = parse_problem(_daemon_problem())
    framework = framework_for(problem, profile=profile)
    reduced = every_node_left_out(framework, problem)
    assert reduced.left_out == frozenset({"agent@node-a"})
    found = exact.solve(reduced, framework, 5.0)
    assert found.placements is not None, found.reason
    placed = {placement.instance.name: placement.node for placement in found.placements}
    assert "agent@node-a" not in placed and {"agent@node-b", "agent@node-c", "agent@node-d"} <= set(placed)
    again = rebalance(_daemon_problem(), 1, 2.0, profile=profile)
    assert again["feasible"] is True and list(again["left_out"]) == ["agent@node-a"]
    refused = {"agent": {"node-a"}, "api": {"node-a"}}
    assert refused_by(again, refused) == []


def test_without_an_every_node_service_nothing_is_asked_up_front(servers):
    server = servers(maintenance({"n0"}))
    framework = framework_for(parse_problem(_cluster()), profile=parse_profile({"extenders": [
        {"urlPrefix": server.url, "filterVerb": "filter"}]}))
    problem = parse_problem(_cluster())
    assert every_node_left_out(framework, problem) is problem and server.requests == []
