# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Scheduler profiles: which plugins run, with which weights, and the operator's own plugins.

Like kube-scheduler's KubeSchedulerConfiguration profiles (pkg/scheduler/apis/config/types.go:
``plugins`` per extension point with ``enabled``/``disabled``, ``pluginConfig`` with each plugin's
args), as a plain mapping (docs/problem-format.md, "Profiles")::

    user_plugins: [/etc/gangplank/image_affinity.py]   # Python files, each defining PLUGIN (a class)
    plugins:
      filter:
        disabled: [NodeSelector]                      # static filters only (below)
        enabled: [ImageAffinity]
      score:
        disabled: [GPUFragmentation]
        enabled: [{name: ImageAffinity, weight: 5}, {name: NodeResourcesFit, weight: 3}]
      pre_filter:
        enabled: []
    plugin_config:
      NodeResourcesFit: {strategy: LeastAllocated}    # MostAllocated (default) or LeastAllocated
    extenders:                                        # HTTP extenders, kube's fields (scheduler/extender.py)
      - {urlPrefix: "http://127.0.0.1:8888/scheduler", filterVerb: filter, ignorable: true}

What may change, so that the exact solver and the plan checker stay right:

- ``filter.disabled`` takes only the filters whose answer is static (NodeUnschedulable, TaintToleration,
  NodeSelector): the exact solver reads those through the framework, so it honours the profile. The
  filters of what instances share (CPU and memory, ports, GPUs, NVMe, anti-affinity, quotas) are modelled
  again in the exact solver and cannot be turned off.
- ``score``: any Score plugin may be disabled or re-weighted (0..1000); a weight of 0 disables it.
- A user plugin may implement PreFilter (node-independent: it must not read what is placed), Filter with
  ``filter_static`` only (the scheduler caches it and the exact solver honours it) and Score (plus
  NormalizeScore; rule 3 of docs/scheduler-design.md: a node's score depends on that node only). A plugin
  that overrides the dynamic ``filter``, or implements QueueSort, PostFilter, Reserve, Permit or Bind, is
  refused: the exact solver could not state its constraint, so it could return a plan that breaks it.

Loading a user plugin runs the file's code: it is the operator's own code, given by the operator, like
a plugin compiled into a custom kube-scheduler.
"""

from __future__ import annotations

import importlib.util
import os
import sys

from ansible_collections.gangplank.platform.plugins.module_utils.messages import show
from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError, Reader, join_path
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import framework as fw
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.extender import parse_extenders
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.extender import extender_class
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.profile import PLUGINS, WEIGHTS
from ansible_collections.gangplank.platform.plugins.module_utils.validation import has_control

POINTS = {"pre_filter": fw.PreFilterPlugin, "filter": fw.FilterPlugin, "score": fw.ScorePlugin}
STATIC_FILTERS = ("NodeUnschedulable", "TaintToleration", "NodeSelector")
STRATEGIES = ("MostAllocated", "LeastAllocated")
MAX_WEIGHT = 1000
MAX_USER_PLUGINS = 16
_REFUSED = (fw.QueueSortPlugin, fw.PostFilterPlugin, fw.ReservePlugin, fw.PermitPlugin, fw.BindPlugin)
_PATH = "profile"


class Profile:
    """The plugins in order, the score weights, what is disabled per extension point, and plugin args."""

    def __init__(self, plugins=PLUGINS, weights=None, disabled=None, config=None):
        self.plugins = tuple(plugins)
        self.weights = dict(WEIGHTS if weights is None else weights)
        self.disabled = {point: frozenset(names) for point, names in (disabled or {}).items()}
        self.config = dict(config or {})


DEFAULT = Profile()


def load_profile(data, base=None, transport=None):
    """parse_profile, with None and an empty mapping both the default profile (the Ansible options' default)."""
    if data is None or data == {}:
        return DEFAULT
    return parse_profile(data, base, transport)


def parse_profile(data, base=None, transport=None):
    """A Profile from a mapping (None: the default); ``base`` is the folder relative user_plugins paths start
    from (the profile file's); ``transport`` reads the files of its HTTP extenders, sets up their TLS and makes
    their calls (module_utils/extender/transport.py's HTTPTransport for real HTTP, or a test's fake with the same
    methods; the caller hands it in, the core picks none: TypeError for a profile with extenders and none).
    Raises ProblemError naming each mistake under ``profile``."""
    if data is None:
        return DEFAULT
    reader = Reader()
    top = reader.mapping(data, _PATH, ("user_plugins", "plugins", "plugin_config", "extenders"), optional_none=False)
    user = _load_user_plugins(reader, top.get("user_plugins"), base)
    classes = list(PLUGINS)
    position = classes.index(next(cls for cls in classes if issubclass(cls, fw.PostFilterPlugin)))
    known = {cls.name: cls for cls in classes}
    weights = dict(WEIGHTS)
    disabled, enabled = {}, {}
    points = reader.mapping(top.get("plugins"), join_path(_PATH, "plugins"), tuple(POINTS))
    for point in POINTS:
        if point not in points:
            continue
        path = join_path(join_path(_PATH, "plugins"), point)
        spec = reader.mapping(points[point], path, ("enabled", "disabled"))
        implementing = sorted(name for name, cls in list(known.items()) + list(user.items())
                              if issubclass(cls, POINTS[point]))
        for index, item in enumerate(reader.sequence(spec.get("disabled"), join_path(path, "disabled"))):
            where = join_path(join_path(path, "disabled"), index)
            if item not in implementing:
                reader.bad(where, item, "a %s plugin: one of %s" % (point, ", ".join(implementing)))
            elif point == "filter" and item in known and item not in STATIC_FILTERS:
                reader.bad(where, item, "a static filter (%s): the exact solver and the plan checker model what %s "
                                        "checks, so it cannot be turned off" % (", ".join(STATIC_FILTERS), item))
            elif point == "pre_filter" and item in known:
                reader.bad(where, item, "a user plugin: the built-in PreFilter plugins carry what the filters read")
            else:
                disabled.setdefault(point, set()).add(item)
                if point == "score":
                    weights.pop(item, None)
        for index, item in enumerate(reader.sequence(spec.get("enabled"), join_path(path, "enabled"))):
            where = join_path(join_path(path, "enabled"), index)
            name, weight = item, None
            if point == "score":
                entry = reader.mapping(item, where, ("name", "weight"), required=("name", "weight"), optional_none=False)
                name = entry.get("name")
                weight = reader.integer(entry.get("weight"), join_path(where, "weight"), minimum=0, maximum=MAX_WEIGHT) \
                    if "weight" in entry else None
                where = join_path(where, "name")
            if name not in implementing:
                reader.bad(where, name, "a %s plugin: one of %s" % (point, ", ".join(implementing)))
                continue
            enabled.setdefault(point, set()).add(name)
            if name in user and user[name] not in classes:
                classes.insert(position, user[name])
                position += 1
            if point == "score" and weight is not None:
                weights[name] = weight
    for name, cls in user.items():
        # A user plugin runs only at the points it is enabled at.
        for point, base_class in POINTS.items():
            if issubclass(cls, base_class) and name not in enabled.get(point, ()):
                disabled.setdefault(point, set()).add(name)
        if cls not in classes:
            reader.error(join_path(_PATH, "user_plugins"),
                         "plugin %s is loaded but enabled at no extension point; expected it under plugins.<point>.enabled" % name)
    config = _plugin_config(reader, top.get("plugin_config"))
    # HTTP extenders (scheduler/extender.py) run after every other filter and score, as kube calls them.
    extenders = parse_extenders(reader, top.get("extenders"), join_path(_PATH, "extenders"), base, transport)
    if extenders and transport is None:
        raise TypeError("a profile with extenders needs a transport (extender/transport.py's HTTPTransport for real HTTP)")
    for extender in extenders:
        cls = extender_class(extender, transport)
        classes.insert(position, cls)
        position += 1
        weights[cls.name] = extender.weight if extender.prioritize_verb else 0
    if reader.errors:
        raise ProblemError(reader.errors)
    return Profile(classes, weights, disabled, config)


def _plugin_config(reader, value):
    path = join_path(_PATH, "plugin_config")
    config = {}
    spec = reader.mapping(value, path, ("NodeResourcesFit",))
    if "NodeResourcesFit" in spec:
        where = join_path(path, "NodeResourcesFit")
        args = reader.mapping(spec["NodeResourcesFit"], where, ("strategy",))
        strategy = args.get("strategy", "MostAllocated")
        if strategy not in STRATEGIES:
            reader.bad(join_path(where, "strategy"), strategy, "one of " + ", ".join(STRATEGIES))
        else:
            config["NodeResourcesFit"] = {"strategy": strategy}
    return config


def _load_user_plugins(reader, value, base):
    """name -> class for each file of ``user_plugins``; each file defines PLUGIN, a plugin class."""
    loaded = {}
    path = join_path(_PATH, "user_plugins")
    for index, item in enumerate(reader.sequence(value, path, MAX_USER_PLUGINS)):
        where = join_path(path, index)
        filename = reader.string(item, where, "the path of a Python file")
        if filename is None:
            continue
        if has_control(filename):
            reader.bad(where, filename, "the path of a Python file, without a line break or other control character")
            continue
        full = filename if os.path.isabs(filename) or base is None else os.path.join(base, filename)
        cls, problem = _load(full, index)
        if problem:
            reader.bad(where, filename, problem)
            continue
        refused = _refusal(cls)
        if refused:
            reader.bad(where, filename, refused)
        elif cls.name in loaded or any(cls.name == builtin.name for builtin in PLUGINS):
            reader.bad(where, filename, "a plugin whose name (%s) no other plugin has" % show(cls.name))
        else:
            loaded[cls.name] = cls
    return loaded


def _load(filename, index):
    """(the class the file defines as PLUGIN, None) or (None, what was expected)."""
    if not filename.endswith(".py") or not os.path.isfile(filename):
        return None, "an existing Python file (*.py)"
    module_name = "gangplank_user_plugin_%d_%s" % (index, os.path.basename(filename)[:-3].replace("-", "_"))
    try:
        spec = importlib.util.spec_from_file_location(module_name, filename)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    except Exception as error:  # noqa: BLE001 (the operator's file: any failure is reported, not raised)
        return None, "a Python file that loads (it raised %s: %s)" % (type(error).__name__, str(error)[:200])
    cls = getattr(module, "PLUGIN", None)
    if not isinstance(cls, type) or not issubclass(cls, fw.Plugin):
        return None, "a file that defines PLUGIN, a subclass of the framework's PreFilterPlugin, FilterPlugin or ScorePlugin"
    if not isinstance(getattr(cls, "name", None), str) or not cls.name or cls.name == fw.Plugin.name:
        return None, "a plugin class with a name (its class attribute name)"
    return cls, None


def _refusal(cls):
    """Why a user plugin class cannot be used, or None."""
    refused = [point.__name__ for point in _REFUSED if issubclass(cls, point)]
    if refused:
        return ("a plugin of PreFilter, Filter (filter_static) and Score only; %s implements %s, which the exact "
                "solver cannot model" % (cls.name, ", ".join(refused)))
    if not any(issubclass(cls, point) for point in POINTS.values()):
        return "a plugin that implements PreFilter, Filter or Score"
    if issubclass(cls, fw.FilterPlugin) and cls.filter is not fw.FilterPlugin.filter:
        return ("a filter with filter_static only: %s overrides filter (what is placed), which the exact solver "
                "cannot model" % cls.name)
    if issubclass(cls, fw.ScorePlugin) and cls.instance_specific:
        return "a score that depends only on the service and the node (instance_specific = False)"
    return None
