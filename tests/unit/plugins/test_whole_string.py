# -*- coding: utf-8 -*-
"""Every validated name, key, reference and path of the input formats is checked whole: a trailing newline (a YAML
block scalar, a vaulted value read from a file) or another control character is refused with an error that names
the path, on one line, and is never stripped away or matched past by ``$``.

One table, ROWS: (format, field, setter, expected path). ``setter(document, suffix)`` writes a valid value with
``suffix`` appended into a fresh valid document of the format; the check runs the format's reader and looks for an
error at the expected path. Another format joins by adding a parse function to PARSERS and its rows to ROWS.

Free text is not in the table: a command's arguments and env values (they may hold a tab or U+202E; NUL and line
breaks are refused) and the content of config files. Quantities and counts take ASCII blanks around them (" 2Mi ",
"3\\n" from a form) and refuse any other control character: QUANTITIES.
"""

from __future__ import annotations

import copy

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gangplank.platform.plugins.action.role_inputs import _MAX_ROLE_NAME, ROLE_NAME
from ansible_collections.gangplank.platform.plugins.module_utils.facts import nvme_facts
from ansible_collections.gangplank.platform.plugins.module_utils.facts.gpu_facts import parse_simulated
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.secrets import read_values
from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import read_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.facts.node_facts import NodeFactsError, valid_host_name
from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError, join_path
from ansible_collections.gangplank.platform.plugins.module_utils.planning.scale import scale_overrides
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import parse_problem
from ansible_collections.gangplank.platform.plugins.module_utils.quantity import parse_cpu, parse_size
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.rebalance import max_moves_value
from ansible_collections.gangplank.platform.plugins.module_utils.validation import has_control, well_formed
from ansible_collections.gangplank.platform.plugins.module_utils import cluster_lock
from ansible_collections.gangplank.platform.plugins.modules import cluster_state
from ansible_collections.gangplank.platform.tests.unit.plugins.modules.module_harness import FailJson, capture_module_exits

# A final newline, the other line ends, a tab, NUL, NEL, LINE SEPARATOR, a bidi override and a lone surrogate.
CONTROLS = ["\n", "\r", "\t", "\x00", "\x85", "\u2028", "\u202e", "\ud800"]
CONTROL_IDS = ["LF", "CR", "TAB", "NUL", "NEL", "LSEP", "RLO", "surrogate"]


def problem():
    return {
        "nodes": {"n1": {"cpu": 8, "memory": "16Gi", "labels": {"zone": "a"},
                         "taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}],
                         "gpus": [{"index": 0, "uuid": "GPU-1", "model": "H100", "memory": "80Gi"}],
                         "nvme": [{"name": "nvme0n1", "size": "1Ti", "labels": ["cache"], "mount": "/mnt/nvme0n1"}]}},
        "quotas": {"team": {"max": {"cpu": 4}}},
        "services": {
            "web": {"quota": "team", "image": "localhost/web:1", "sidecars": ["log"], "depends_on": ["db"],
                    "anti_affinity": ["db"], "node_selector": {"zone": "a"},
                    "tolerations": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}],
                    "resources": {"cpu": 1, "gpu": {"count": 1, "models": ["H100"]}, "nvme": {"label": "cache", "size": "1Gi"}}},
            "log": {"sidecar": True},
            "db": {"tolerations": [{"key": "dedicated", "effect": "NoSchedule"}]},
        },
        "previous": {"web-0": {"node": "n1", "gpus": [{"uuid": "GPU-1"}], "nvme": {"name": "nvme0n1"}}},
    }


def catalog():
    return {"api": {"image": "localhost/api:1", "ports": [8080], "command": ["serve"], "env": {"MODE": "prod"},
                    "nvme_path": "/mnt/nvme",
                    "health": {"http": {"port": 8080, "path": "/healthz"}},
                    "config": [{"dest": "/etc/api.conf", "src": "templates/api.conf.j2"}],
                    "secrets": {"db": {"var": "vault_db"}, "tok": {"var": "vault_tok", "env": "API_TOKEN"},
                                "cert": {"var": "vault_cert", "target": "/etc/ssl/api.pem"}}}}


def rename(mapping, old, new):
    mapping[new] = mapping.pop(old)


def problem_errors(document):
    try:
        parse_problem(document)
    except ProblemError as error:
        return error.errors
    return []


def catalog_errors(services):
    return read_catalog(services)[2]


def scale_errors(request):
    try:
        scale_overrides({"web": {"scalable": True}}, {}, request)
    except ProblemError as error:
        return error.errors
    return []


def nvme_errors(arguments):
    try:
        nvme_facts.collect(root="/nonexistent", **arguments)
    except ValueError as error:
        return [tuple(line.split(": ", 1)) for line in str(error).splitlines()]
    return []


def gpu_errors(entries):
    try:
        parse_simulated(entries, "node-a")
    except ValueError as error:
        return [tuple(line.split(": ", 1)) for line in str(error).splitlines()]
    return []


PARSERS = {"gpu_facts": (lambda: [{"model": "L4", "memory": "24Gi", "uuid": "GPU-x", "compute_capability": "8.9"}], gpu_errors),
           "problem": (problem, problem_errors), "catalog": (catalog, catalog_errors),
           "scale": (lambda: {"service": "web", "replicas": 2}, scale_errors),
           "nvme_facts": (lambda: {"labels": {"nvme0n1": ["cache"]},
                                   "simulated": [{"name": "nvme0n1", "size": "1Ti", "model": "M", "serial": "S", "mount": "/mnt/a",
                                                  "fstype": "xfs"}]}, nvme_errors)}


def key(path, name):
    return str(join_path(path, name))


ROWS = [
    # The problem format (docs/problem-format.md).
    ("problem", "node name", lambda d, s: rename(d["nodes"], "n1", "n1" + s), lambda s: key("nodes", "n1" + s)),
    ("problem", "node label key", lambda d, s: rename(d["nodes"]["n1"]["labels"], "zone", "zone" + s),
     lambda s: key("nodes.n1.labels", "zone" + s)),
    ("problem", "node label value", lambda d, s: d["nodes"]["n1"]["labels"].update(zone="a" + s), lambda s: "nodes.n1.labels.zone"),
    ("problem", "taint key", lambda d, s: d["nodes"]["n1"]["taints"][0].update(key="dedicated" + s),
     lambda s: "nodes.n1.taints[0].key"),
    ("problem", "taint value", lambda d, s: d["nodes"]["n1"]["taints"][0].update(value="ml" + s),
     lambda s: "nodes.n1.taints[0].value"),
    ("problem", "GPU uuid", lambda d, s: d["nodes"]["n1"]["gpus"][0].update(uuid="GPU-1" + s), lambda s: "nodes.n1.gpus[0].uuid"),
    ("problem", "GPU model", lambda d, s: d["nodes"]["n1"]["gpus"][0].update(model="H100" + s), lambda s: "nodes.n1.gpus[0].model"),
    ("problem", "node gpu_sharing", lambda d, s: d["nodes"]["n1"].update(gpu_sharing="mps" + s), lambda s: "nodes.n1.gpu_sharing"),
    ("problem", "NVMe name", lambda d, s: d["nodes"]["n1"]["nvme"][0].update(name="nvme0n1" + s), lambda s: "nodes.n1.nvme[0].name"),
    ("problem", "NVMe label", lambda d, s: d["nodes"]["n1"]["nvme"][0].update(labels=["cache" + s]),
     lambda s: "nodes.n1.nvme[0].labels[0]"),
    ("problem", "NVMe mount", lambda d, s: d["nodes"]["n1"]["nvme"][0].update(mount="/mnt/nvme0n1" + s),
     lambda s: "nodes.n1.nvme[0].mount"),
    ("problem", "quota name", lambda d, s: rename(d["quotas"], "team", "team" + s), lambda s: key("quotas", "team" + s)),
    ("problem", "service name", lambda d, s: rename(d["services"], "db", "db" + s), lambda s: key("services", "db" + s)),
    ("problem", "service quota", lambda d, s: d["services"]["web"].update(quota="team" + s), lambda s: "services.web.quota"),
    ("problem", "service image", lambda d, s: d["services"]["web"].update(image="localhost/web:1" + s),
     lambda s: "services.web.image"),
    ("problem", "sidecar reference", lambda d, s: d["services"]["web"].update(sidecars=["log" + s]),
     lambda s: "services.web.sidecars[0]"),
    ("problem", "depends_on reference", lambda d, s: d["services"]["web"].update(depends_on=["db" + s]),
     lambda s: "services.web.depends_on[0]"),
    ("problem", "anti_affinity reference", lambda d, s: d["services"]["web"].update(anti_affinity=["db" + s]),
     lambda s: "services.web.anti_affinity[0]"),
    ("problem", "node_selector key", lambda d, s: rename(d["services"]["web"]["node_selector"], "zone", "zone" + s),
     lambda s: key("services.web.node_selector", "zone" + s)),
    ("problem", "node_selector value", lambda d, s: d["services"]["web"]["node_selector"].update(zone="a" + s),
     lambda s: "services.web.node_selector.zone"),
    ("problem", "toleration key", lambda d, s: d["services"]["web"]["tolerations"][0].update(key="dedicated" + s),
     lambda s: "services.web.tolerations[0].key"),
    ("problem", "toleration value", lambda d, s: d["services"]["web"]["tolerations"][0].update(value="ml" + s),
     lambda s: "services.web.tolerations[0].value"),
    ("problem", "GPU model requested", lambda d, s: d["services"]["web"]["resources"]["gpu"].update(models=["H100" + s]),
     lambda s: "services.web.resources.gpu.models[0]"),
    ("problem", "NVMe label requested", lambda d, s: d["services"]["web"]["resources"]["nvme"].update(label="cache" + s),
     lambda s: "services.web.resources.nvme.label"),
    ("problem", "previous instance name", lambda d, s: rename(d["previous"], "web-0", "web-0" + s),
     lambda s: key("previous", "web-0" + s)),
    ("problem", "previous node", lambda d, s: d["previous"]["web-0"].update(node="n1" + s), lambda s: "previous.web-0.node"),
    ("problem", "previous GPU uuid", lambda d, s: d["previous"]["web-0"]["gpus"][0].update(uuid="GPU-1" + s),
     lambda s: "previous.web-0.gpus[0].uuid"),
    ("problem", "previous NVMe name", lambda d, s: d["previous"]["web-0"]["nvme"].update(name="nvme0n1" + s),
     lambda s: "previous.web-0.nvme.name"),
    # The catalog (docs/catalog.md): the deploy keys.
    ("catalog", "service name", lambda d, s: rename(d, "api", "api" + s), lambda s: key("services", "api" + s)),
    ("catalog", "image", lambda d, s: d["api"].update(image="localhost/api:1" + s), lambda s: "services.api.image"),
    ("catalog", "env name", lambda d, s: rename(d["api"]["env"], "MODE", "MODE" + s), lambda s: key("services.api.env", "MODE" + s)),
    ("catalog", "nvme_path", lambda d, s: d["api"].update(nvme_path="/mnt/nvme" + s), lambda s: "services.api.nvme_path"),
    ("catalog", "health http path", lambda d, s: d["api"]["health"]["http"].update(path="/healthz" + s),
     lambda s: "services.api.health.http.path"),
    ("catalog", "config dest", lambda d, s: d["api"]["config"][0].update(dest="/etc/api.conf" + s),
     lambda s: "services.api.config[0].dest"),
    ("catalog", "config src", lambda d, s: d["api"]["config"][0].update(src="templates/api.conf.j2" + s),
     lambda s: "services.api.config[0].src"),
    ("catalog", "max_unavailable", lambda d, s: d["api"].update(max_unavailable="25%" + s), lambda s: "services.api.max_unavailable"),
    # A secret's places: the error is at the mapping (a secret's name is not shown in a path when it is not one).
    ("catalog", "secret name", lambda d, s: rename(d["api"]["secrets"], "db", "db" + s), lambda s: "services.api.secrets"),
    ("catalog", "secret var", lambda d, s: d["api"]["secrets"]["db"].update(var="vault_db" + s), lambda s: "services.api.secrets.db.var"),
    ("catalog", "secret var (short form)", lambda d, s: d["api"]["secrets"].update(db="vault_db" + s),
     lambda s: "services.api.secrets.db.var"),
    ("catalog", "secret env", lambda d, s: d["api"]["secrets"]["tok"].update(env="API_TOKEN" + s),
     lambda s: "services.api.secrets.tok.env"),
    ("catalog", "secret target", lambda d, s: d["api"]["secrets"]["cert"].update(target="/etc/ssl/api.pem" + s),
     lambda s: "services.api.secrets.cert.target"),
    ("catalog", "secret mode", lambda d, s: d["api"]["secrets"]["cert"].update(mode="0400" + s),
     lambda s: "services.api.secrets.cert.mode"),
    # A scale request (playbooks/scale.yml).
    ("scale", "service", lambda d, s: d.update(service="web" + s), lambda s: "scale.service"),
    # The NVMe facts' operator input.
    ("nvme_facts", "labels key", lambda d, s: rename(d["labels"], "nvme0n1", "nvme0n1" + s), lambda s: "labels"),
    ("nvme_facts", "label", lambda d, s: d["labels"].update(nvme0n1=["cache" + s]), lambda s: "labels.nvme0n1[0]"),
    ("nvme_facts", "simulated name", lambda d, s: d["simulated"][0].update(name="nvme0n1" + s), lambda s: "gangplank_simulated_nvme[0].name"),
    ("nvme_facts", "simulated model", lambda d, s: d["simulated"][0].update(model="M" + s), lambda s: "gangplank_simulated_nvme[0].model"),
    ("nvme_facts", "simulated serial", lambda d, s: d["simulated"][0].update(serial="S" + s),
     lambda s: "gangplank_simulated_nvme[0].serial"),
    ("nvme_facts", "simulated fstype", lambda d, s: d["simulated"][0].update(fstype="xfs" + s),
     lambda s: "gangplank_simulated_nvme[0].fstype"),
    ("gpu_facts", "simulated model", lambda d, s: d[0].update(model="L4" + s), lambda s: "gangplank_simulated_gpus[0].model"),
    ("gpu_facts", "simulated uuid", lambda d, s: d[0].update(uuid="GPU-x" + s), lambda s: "gangplank_simulated_gpus[0].uuid"),
    ("gpu_facts", "simulated compute_capability", lambda d, s: d[0].update(compute_capability="8.9" + s),
     lambda s: "gangplank_simulated_gpus[0].compute_capability"),
    ("nvme_facts", "simulated mount", lambda d, s: d["simulated"][0].update(mount="/mnt/a" + s),
     lambda s: "gangplank_simulated_nvme[0].mount"),
]


# Descriptive text (a simulated device's model, serial and file system type): ASCII blanks around it are dropped, any
# other control character is refused at its path.
TRIMMED = {"simulated model", "simulated serial", "simulated fstype", "simulated uuid", "simulated compute_capability"}


@pytest.mark.parametrize("form", sorted(PARSERS))
def test_the_base_documents_are_valid(form):
    build, errors_of = PARSERS[form]
    assert errors_of(build()) == []


@pytest.mark.parametrize("control", CONTROLS, ids=CONTROL_IDS)
@pytest.mark.parametrize("form, field, setter, expected", ROWS, ids=["%s: %s" % (row[0], row[1]) for row in ROWS])
def test_a_control_character_is_refused_at_its_path(form, field, setter, expected, control):
    build, errors_of = PARSERS[form]
    for position in ("end", "middle"):
        if position == "end" and field in TRIMMED and control in " \t\r\n":
            continue
        document = copy.deepcopy(build())
        setter(document, control if position == "end" else control + "x")
        errors = errors_of(document)
        path = expected(control if position == "end" else control + "x")
        assert path in [str(where) for where, _message in errors], (position, errors)
        for where, message in errors:
            # One line each: the character is shown escaped, never as is.
            assert not has_control(str(where) + message), (where, message)


CANARY = "CANARY hunter2!x9"         # not a name: a value written where a name goes


def _set(mapping, name, value):
    mapping[name] = value


# (place, setter(catalog, canary)): a value that may be a secret in each place of the catalog that reports on a secret's
# name, variable or delivery, or on an env value.
SECRET_PLACES = [
    ("secret name", lambda d, c: _set(d["api"]["secrets"], c, {"var": "vault_x"})),
    ("secret var", lambda d, c: d["api"]["secrets"]["db"].update(var=c)),
    ("secret var with a final newline", lambda d, c: d["api"]["secrets"]["db"].update(var="hunter2\n")),
    ("secret short form", lambda d, c: d["api"]["secrets"].update(db=c)),
    ("secret short form, a number", lambda d, c: d["api"]["secrets"].update(db=12345678901234567)),
    ("secret entry a list", lambda d, c: d["api"]["secrets"].update(db=[c])),
    ("secrets a string", lambda d, c: d["api"].update(secrets=c)),
    ("secrets a list", lambda d, c: d["api"].update(secrets=[c])),
    ("secret env", lambda d, c: d["api"]["secrets"]["tok"].update(env=c)),
    ("secret env reserved", lambda d, c: d["api"]["secrets"]["tok"].update(env="NVIDIA_VISIBLE_DEVICES")),
    ("secret target", lambda d, c: d["api"]["secrets"]["cert"].update(target=c)),
    ("secret mode", lambda d, c: d["api"]["secrets"]["cert"].update(mode=c)),
    ("secret uid", lambda d, c: d["api"]["secrets"]["cert"].update(uid=c)),
    ("secret key not a string", lambda d, c: _set(d["api"]["secrets"], 12345678901234567, "vault_x")),
    ("env value of a reserved name", lambda d, c: d["api"]["env"].update(NVIDIA_VISIBLE_DEVICES=c)),
    ("env value of the other reserved name", lambda d, c: d["api"]["env"].update(CUDA_VISIBLE_DEVICES=12345678901234567)),
    ("env value a list", lambda d, c: d["api"]["env"].update(TOKEN=[c])),
    ("env value with a line break", lambda d, c: d["api"]["env"].update(TOKEN=c + "\n")),
    ("env value a huge number", lambda d, c: d["api"]["env"].update(TOKEN=10 ** 5000)),
    ("env a string", lambda d, c: d["api"].update(env=c)),
    ("config content", lambda d, c: d["api"]["config"][0].update(src=None, content=[c])),
]


@pytest.mark.parametrize("place, setter", SECRET_PLACES, ids=[row[0] for row in SECRET_PLACES])
def test_a_secrets_places_and_env_values_are_not_quoted_back(place, setter):
    """M7, M13: the error names the path and the value's type and size, never the value."""
    del place
    document = catalog()
    setter(document, CANARY)
    errors = catalog_errors(document)
    assert errors
    text = "\n".join("%s: %s" % error for error in errors)
    for secret in ("CANARY", "hunter2", "12345678901234567"):
        assert secret not in text, text
    assert not any(has_control(line) for line in text.splitlines())


QUANTITIES = [
    ("cpu", parse_cpu, "4"),
    ("size", parse_size, "16Gi"),
    ("scale replicas", lambda text: scale_overrides({"web": {"scalable": True}}, {}, {"service": "web", "replicas": text})["web"], "3"),
    ("max_moves", max_moves_value, "3"),
]


@pytest.mark.parametrize("control", CONTROLS, ids=CONTROL_IDS)
@pytest.mark.parametrize("what, parse, good", QUANTITIES, ids=[row[0] for row in QUANTITIES])
def test_quantities_and_counts_take_ascii_blanks_around_them_and_refuse_the_rest(what, parse, good, control):
    del what
    expected = parse(good)
    if control in " \t\r\n":
        assert parse(good + control) == expected and parse(control + good) == expected
        return
    for text in (good + control, good[:1] + control + good[1:]):
        try:
            result = parse(text)
        except (ValueError, ProblemError):
            continue
        assert result == text, "%r was read as %r" % (text, result)     # max_moves_value hands it on as it is


@pytest.mark.parametrize("control", CONTROLS, ids=CONTROL_IDS)
def test_host_and_role_names_are_whole(control):
    assert valid_host_name("node-a") and not valid_host_name("node-a" + control)
    assert well_formed("deploy", ROLE_NAME, _MAX_ROLE_NAME) and not well_formed("deploy" + control, ROLE_NAME, _MAX_ROLE_NAME)


def test_an_operator_label_with_a_line_break_is_refused_by_the_scheduler_at_its_path():
    """gangplank_labels reach the scheduler as node labels: refused there, at the node's label path."""
    document = problem()
    document["nodes"]["n1"]["labels"]["rack"] = "r1\n"
    assert "nodes.n1.labels.rack" in [path for path, _message in problem_errors(document)]
    assert NodeFactsError     # node_facts hands labels on; the scheduler's parser checks them


HUGE = 10 ** 5000       # str() of it raises ValueError (more than 4,300 digits)


def test_m8_a_secret_variable_holding_a_huge_integer_is_an_error_at_its_path():
    specs = {"api": {"secrets": [{"name": "db", "var": "vault_db", "delivery": "file"},
                                 {"name": "n", "var": "small", "delivery": "env", "env": "N"}]}}
    values, hashes, errors = read_values(specs, {"vault_db": HUGE, "small": 10 ** 3999}.__getitem__, "k" * 32)
    assert errors == [("services.api.secrets.db", "the variable vault_db holds an integer of about 5001 digits; expected a "
                                                  "string, or a number of at most 4000 digits (quote a longer one)")]
    assert values == {"small": "1" + "0" * 3999} and set(hashes) == {"small"}


@pytest.mark.parametrize("where, run, path", [
    ("env value", lambda: catalog_errors({"api": dict(catalog()["api"], env={"N": HUGE})}), "services.api.env.N"),
    ("catalog service key", lambda: catalog_errors({HUGE: {"image": "localhost/a:1"}}), "services.an integer of about 5001 digits"),
    ("node label value", lambda: problem_errors({"nodes": {"n": {"cpu": 1, "memory": 1, "labels": {"a": HUGE}}}, "services": {}}),
     "nodes.n.labels.a"),
    ("node cpu", lambda: problem_errors({"nodes": {"n": {"cpu": HUGE, "memory": 1}}, "services": {}}), "nodes.n.cpu"),
    ("scale replicas", lambda: scale_errors({"service": "web", "replicas": HUGE}), "scale.replicas"),
    ("secret uid", lambda: catalog_errors({"api": dict(catalog()["api"], secrets={"db": {"var": "v", "uid": HUGE}})}),
     "services.api.secrets.db.uid"),
    ("secret short form", lambda: catalog_errors({"api": dict(catalog()["api"], secrets={"db": HUGE})}), "services.api.secrets.db"),
    ("simulated GPU compute_capability", lambda: gpu_errors([{"model": "L4", "memory": "1Gi", "compute_capability": HUGE}]),
     "gangplank_simulated_gpus[0].compute_capability"),
    ("simulated GPU key", lambda: gpu_errors([{"model": "L4", "memory": "1Gi", HUGE: 1}]), "gangplank_simulated_gpus[0]"),
])
def test_m8_a_huge_integer_anywhere_is_an_error_at_its_path(where, run, path):
    del where
    errors = run()
    assert path in [str(where) for where, _message in errors], errors
    assert all("4300" not in message and "Exceeds" not in message for _where, message in errors)


@pytest.mark.parametrize("count, accepted", [("3", True), ("3\n", True), (" 3 ", True), ("3\x00", False), ("3\u2028", False),
                                             ("\u00b3", False), (HUGE, False)],
                         ids=["digits", "newline", "spaces", "NUL", "LSEP", "superscript", "huge"])
def test_the_records_replica_counts_take_ascii_blanks_and_refuse_the_rest(count, accepted):
    current = {key: kind() for key, kind in cluster_lock.CONTENT_TYPES.items()}
    if accepted:
        assert cluster_lock.check_content({"replicas": {"web": count}}, current)["replicas"] == {"web": 3}
        return
    with pytest.raises(cluster_lock.StateError) as raised:
        cluster_lock.check_content({"replicas": {"web": count}}, current)
    assert str(raised.value).startswith("record.replicas.web must be a whole number of 0 or more, got ")
    assert not has_control(str(raised.value))


# A lone surrogate never reaches the module: Ansible refuses to decode its arguments.
@pytest.mark.parametrize("control", CONTROLS[:-1], ids=CONTROL_IDS[:-1])
@pytest.mark.parametrize("name", ["owner", "job_id"])
def test_the_lock_owner_and_job_id_are_one_line(tmp_path, monkeypatch, name, control):
    capture_module_exits(monkeypatch)
    args = {"path": str(tmp_path / "state"), "action": "lock", "owner": "alice", "job_id": "4711"}
    args[name] += control
    with patch_module_args(args):
        with pytest.raises(FailJson) as failed:
            cluster_state.main()
    assert failed.value.args[0]["msg"].startswith("%s: got " % name)
    assert not has_control(failed.value.args[0]["msg"])


def test_a_huge_integer_elsewhere_in_the_record_is_a_clear_error():
    current = {key: kind() for key, kind in cluster_lock.CONTENT_TYPES.items()}
    expected = r"^record cannot be stored as JSON: it holds an integer of more than 4,300 digits$"
    with pytest.raises(cluster_lock.StateError, match=expected):
        cluster_lock.check_content({"placement": {"web-0": {"rank": HUGE}}}, current)


@pytest.mark.parametrize("control", CONTROLS[:-1], ids=CONTROL_IDS[:-1])
def test_role_inputs_reads_no_file_for_a_role_name_with_a_control_character(control):
    from unittest.mock import MagicMock

    from ansible.parsing.dataloader import DataLoader
    from ansible.playbook.task import Task
    from ansible.template import Templar

    from ansible_collections.gangplank.platform.plugins.action.role_inputs import ActionModule

    task = Task()
    task.args = {"roles": ["deploy" + control]}
    action = ActionModule(task, MagicMock(), MagicMock(check_mode=False), loader=DataLoader(),
                          templar=Templar(loader=DataLoader(), variables={}), shared_loader_obj=None)
    result = action.run(task_vars={})
    assert result["failed"] and "not a role of this collection" in result["msg"], result
