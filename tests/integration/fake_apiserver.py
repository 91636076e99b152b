# SPDX-License-Identifier: MIT
"""A fake kube-apiserver for the DRA tests: HTTPS (TLS >= 1.2, certificates made by the openssl
CLI), HTTP/1.1 keep-alive, bearer tokens, JSON, the real REST paths, status codes and Status
bodies, and strict validation of the ResourceSlices it receives.

Run with Debian's /usr/bin/python3 (stdlib only: ssl, http.server).

Served (everything else: 404 like the real one):
  GET    /api/v1/nodes/{name}
  GET    /apis/resource.k8s.io/v1/resourceslices[?fieldSelector=...&labelSelector=...]
  POST   /apis/resource.k8s.io/v1/resourceslices          (generateName honoured)
  DELETE /apis/resource.k8s.io/v1/resourceslices?fieldSelector=...   (DeleteCollection)
  GET|PUT|DELETE /apis/resource.k8s.io/v1/resourceslices/{name}
  GET    /apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}
  watch=1|true: 410 Expired for a resourceVersion older than the current one, else 405
  (no watch is implemented: the driver polls).

Validation follows kubernetes/kubernetes pkg/apis/resource/validation/validation.go
(validateResourceSliceSpec, validateResourcePool, validateDevice, validateDeviceAttribute,
validateQualifiedName, validateCIdentifier) and the limits of k8s.io/api resource/v1 types.go
(ResourceSliceMaxDevices 128, ResourceSliceMaxAttributesAndCapacitiesPerDevice 32,
DeviceMaxIDLength 32, DeviceMaxDomainLength 63, DeviceAttributeMaxValueLength 64,
PoolNameMaxLength 253; with a device taint, ResourceSliceMaxDevicesWithTaintsOrConsumesCounters
64, DeviceTaintsMaxLength 16, validateDeviceTaint's key, value and effect); device taints get
SetDefaults_DeviceTaint's timeAdded (now, to the second) on create and update, or are dropped
when device_taints is False (the DRADeviceTaints gate off, as 1.33-1.35 by default,
dropDisabledDRADeviceTaintsFields); messages are rendered as field.Error.Error() does, collected in a 422
Status with reason Invalid and details.causes[].field. One rule is the stand-in's own, not the
apiserver's (it only checks that owner references are complete): with require_node_owner, a
slice with spec.nodeName must be owned by that Node (apiVersion v1, kind Node, its name and
uid), as the design demands for garbage collection.

Test controls: outage(mode) (None | "refuse" | "hang" | "stall" | "reset" | an HTTP code: 500,
503, 429), latency (seconds before each answer), inject(...) one-shot faults on matching
requests, rotate_token(grace=...), revoke_token(), a request log (self.log), claims
put/delete/replace, direct slice access (slices(), add_slice()).
"""
import datetime
import http.server
import json
import os
import pathlib
import random
import re
import shutil
import socket
import socketserver
import ssl
import struct
import subprocess
import tempfile
import threading
import time
import urllib.parse
import uuid

import waits

GROUP = "resource.k8s.io"
RV1 = "/apis/resource.k8s.io/v1"
SLICES = RV1 + "/resourceslices"
MAX_BODY = 3 * 1024 * 1024  # apiserver's default --max-resource-write-bytes (3 MiB): 413 above

# -- limits (k8s.io/api resource/v1 types.go; validation.go) -------------------------------------
MAX_DEVICES = 128
MAX_DEVICES_WITH_TAINTS = 64  # ResourceSliceMaxDevicesWithTaintsOrConsumesCounters
MAX_TAINTS = 16  # DeviceTaintsMaxLength
TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")  # 1.37 validation (None: 1.36+)
MAX_ATTRS_AND_CAPS = 32
MAX_ID_LEN = 32
MAX_DOMAIN_LEN = 63
MAX_VALUE_LEN = 64
MAX_POOL_NAME = 253
MAX_DRIVER_NAME = 63

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
C_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_NUM = r"(0|[1-9]\d*)"
_PRE = r"(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
_BUILD = r"[0-9a-zA-Z-]+"
SEMVER = re.compile(r"^" + _NUM + r"\." + _NUM + r"\." + _NUM + r"(-" + _PRE + r"(\." + _PRE +
                    r")*)?(\+" + _BUILD + r"(\." + _BUILD + r")*)?$")
QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)"
                      r"([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")

LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
             "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
             "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                 "characters, '-' or '.', and must start and end with an alphanumeric character "
                 "(e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?"
                 "(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
CIDENT_MSG = ("a valid C identifier must start with alphabetic character or '_', followed by a "
              "string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or "
              "'MyName', regex used for validation is '[A-Za-z_][A-Za-z0-9_]*')")

# Known fields of resource.k8s.io/v1 ResourceSlice (1.34): anything else is reported as an
# "unknown field" warning, as the apiserver's default fieldValidation=Warn does.
META_FIELDS = {"name", "generateName", "namespace", "uid", "resourceVersion", "generation",
               "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
               "annotations", "ownerReferences", "finalizers", "managedFields", "selfLink"}
SPEC_FIELDS = {"driver", "pool", "nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection",
               "devices", "sharedCounters"}
POOL_FIELDS = {"name", "generation", "resourceSliceCount"}
DEVICE_FIELDS = {"name", "attributes", "capacity", "consumesCounters", "nodeName", "nodeSelector",
                 "allNodes", "taints", "bindsToNode", "bindingConditions",
                 "bindingFailureConditions", "allowMultipleAllocations"}
ATTR_FIELDS = {"int", "bool", "string", "version"}
CAP_FIELDS = {"value", "requestPolicy"}


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- certificates ---------------------------------------------------------------------------------
DEFAULT_SANS = ("DNS:kubernetes", "DNS:kubernetes.default", "DNS:kubernetes.default.svc",
                "DNS:kubernetes.default.svc.cluster.local", "IP:127.0.0.1")


def make_pki(directory, sans=DEFAULT_SANS, cn="kube-apiserver", days=2):
    """A CA (ca.crt/ca.key) and a serving cert signed by it (server.crt/server.key) with the
    given subjectAltNames, RSA 2048 like kubeadm's, made by the openssl CLI. Returns a dict of
    paths."""
    d = pathlib.Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    p = {k: str(d / k) for k in ("ca.crt", "ca.key", "server.crt", "server.key", "server.csr",
                                 "ext.cnf")}

    def ossl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", p["ca.key"], "-out",
         p["ca.crt"], "-days", str(days), "-subj", "/CN=kubernetes",
         "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign")
    ossl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", p["server.key"], "-out",
         p["server.csr"], "-subj", "/CN=" + cn)
    pathlib.Path(p["ext.cnf"]).write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\nsubjectAltName=%s\n" % ",".join(sans))
    ossl("x509", "-req", "-in", p["server.csr"], "-CA", p["ca.crt"], "-CAkey", p["ca.key"],
         "-CAcreateserial", "-out", p["server.crt"], "-days", str(days), "-extfile", p["ext.cnf"])
    return {"ca": p["ca.crt"], "ca_key": p["ca.key"], "cert": p["server.crt"],
            "key": p["server.key"]}


_pki_cache = {}


def cached_pki(sans=DEFAULT_SANS):
    """make_pki once per process and SAN set (key generation costs ~0.2 s)."""
    key = tuple(sans)
    if key not in _pki_cache:
        _pki_cache[key] = make_pki(tempfile.mkdtemp(dir="/tmp", prefix="rdppki"), sans)
    return _pki_cache[key]


# -- field errors (k8s.io/apimachinery/pkg/util/validation/field) ---------------------------------
def _fmt_value(v):
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        return str(v)
    return json.dumps(v, separators=(",", ":"))


class FieldError:
    REASONS = {"Invalid": "FieldValueInvalid", "Required": "FieldValueRequired",
               "TooMany": "FieldValueTooMany", "TooLong": "FieldValueTooLong",
               "Forbidden": "FieldValueForbidden", "Duplicate": "FieldValueDuplicate",
               "NotSupported": "FieldValueNotSupported"}

    def __init__(self, kind, field, value=None, detail=""):
        self.kind, self.field, self.value, self.detail = kind, field, value, detail

    def body(self):
        k = self.kind
        if k == "Invalid":
            s = "Invalid value: %s" % _fmt_value(self.value)
        elif k == "Required":
            s = "Required value"
        elif k == "TooMany":
            s = "Too many: %s" % self.value
        elif k == "TooLong":
            s = "Too long"
        elif k == "Forbidden":
            s = "Forbidden"
        elif k == "Duplicate":
            s = "Duplicate value: %s" % _fmt_value(self.value)
        else:
            s = "Unsupported value: %s" % _fmt_value(self.value)
        return s + (": " + self.detail if self.detail else "")

    def error(self):
        return "%s: %s" % (self.field, self.body())

    def cause(self):
        return {"reason": self.REASONS[self.kind], "message": self.body(), "field": self.field}


def _label_errs(v, path):
    errs = []
    if len(v) > 63:
        errs.append(FieldError("Invalid", path, v, "must be no more than 63 characters"))
    if not DNS1123_LABEL.match(v):
        errs.append(FieldError("Invalid", path, v, LABEL_MSG))
    return errs


def _subdomain_errs(v, path, maxlen=253):
    errs = []
    if len(v) > maxlen:
        errs.append(FieldError("Invalid", path, v, "must be no more than %d characters" % maxlen))
    if not DNS1123_SUBDOMAIN.match(v):
        errs.append(FieldError("Invalid", path, v, SUBDOMAIN_MSG))
    return errs


def _driver_errs(v, path):
    """corevalidation.ValidateCSIDriverName: required, <= 63, lowercase DNS subdomain."""
    if not isinstance(v, str) or v == "":
        return [FieldError("Required", path)]
    errs = []
    if len(v) > MAX_DRIVER_NAME:
        errs.append(FieldError("TooLong", path, v, "may not be more than %d bytes" %
                               MAX_DRIVER_NAME))
    if not DNS1123_SUBDOMAIN.match(v.lower()):
        errs.append(FieldError("Invalid", path, v, SUBDOMAIN_MSG))
    elif v != v.lower():
        errs.append(FieldError("Invalid", path, v, SUBDOMAIN_MSG))
    return errs


def _cident_errs(v, path):
    errs = []
    if len(v) > MAX_ID_LEN:
        errs.append(FieldError("TooLong", path, "", "may not be more than %d bytes" % MAX_ID_LEN))
    if not C_IDENT.match(v):
        errs.append(FieldError("Invalid", path, v, CIDENT_MSG))
    return errs


def _qualified_name_errs(name, path):
    """validateQualifiedName: a C identifier, or <driver-name-like domain>/<C identifier>.
    (The path is the map's, not the key's, exactly as upstream passes fldPath.)"""
    parts = name.split("/")
    if len(parts) == 1:
        return _cident_errs(parts[0], path)
    if len(parts) == 2:
        errs = []
        if parts[0] == "":
            errs.append(FieldError("Invalid", path, "", "the domain must not be empty"))
        else:
            errs += _driver_errs(parts[0], path)
        if parts[1] == "":
            errs.append(FieldError("Invalid", path, "", "the name must not be empty"))
        else:
            errs += _cident_errs(parts[1], path)
        return errs
    return [FieldError("Invalid", path, name, "must not contain more than one slash")]


def _key(path, k, maxlen=MAX_DOMAIN_LEN + 1 + MAX_ID_LEN):
    """fldPath.Key(truncateIfTooLong(k, maxlen))."""
    if len(k) > maxlen:
        rem = maxlen - 3
        k = k[:(rem + 1) // 2] + "..." + k[len(k) - rem // 2:]
    return "%s[%s]" % (path, k)


def _attr_errs(a, path):
    if not isinstance(a, dict):
        return [FieldError("Invalid", path, a, "must be an object")]
    errs = []
    n = 0
    if "bool" in a and a["bool"] is not None:
        n += 1
        if not isinstance(a["bool"], bool):
            errs.append(FieldError("Invalid", path + ".bool", a["bool"], "must be a boolean"))
    if "int" in a and a["int"] is not None:
        n += 1
        if isinstance(a["int"], bool) or not isinstance(a["int"], int) or \
                not -2**63 <= a["int"] < 2**63:
            errs.append(FieldError("Invalid", path + ".int", a["int"], "must be an int64"))
    if "string" in a and a["string"] is not None:
        n += 1
        if not isinstance(a["string"], str):
            errs.append(FieldError("Invalid", path + ".string", a["string"], "must be a string"))
        elif len(a["string"].encode()) > MAX_VALUE_LEN:
            errs.append(FieldError("TooLong", path + ".string", "",
                                   "may not be more than %d bytes" % MAX_VALUE_LEN))
    if "version" in a and a["version"] is not None:
        n += 1
        v = a["version"]
        if not isinstance(v, str) or not SEMVER.match(v):
            errs.append(FieldError("Invalid", path + ".version", v,
                                   "must be a string compatible with semver.org spec 2.0.0"))
        if isinstance(v, str) and len(v.encode()) > MAX_VALUE_LEN:
            errs.append(FieldError("TooLong", path + ".version", "",
                                   "may not be more than %d bytes" % MAX_VALUE_LEN))
    if n == 0:
        errs.append(FieldError("Invalid", path, "", "exactly one value must be specified"))
    elif n > 1:
        errs.append(FieldError("Invalid", path, a, "exactly one value must be specified"))
    return errs


def _quantity_errs(c, path, multi=False):
    if not isinstance(c, dict) or "value" not in c:
        return [FieldError("Required", path + ".value")]
    v = c["value"]
    if isinstance(v, bool) or not isinstance(v, (str, int)) or not QUANTITY.match(str(v)):
        return [FieldError("Invalid", path + ".value", v,
                           "quantities must match the regular expression "
                           "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    if c.get("requestPolicy") is not None:
        if not multi:
            return [FieldError("Forbidden", path + ".requestPolicy", None,
                               "allowMultipleAllocations must be true")]
        return _request_policy_errs(_qty(v), c["requestPolicy"], path + ".requestPolicy")
    return []


def _taint_errs(taints, path):
    """validateDeviceTaint: a label key, a label value, a known effect."""
    if not isinstance(taints, list):
        return [FieldError("Invalid", path, taints, "must be a list")]
    if len(taints) > MAX_TAINTS:
        return [FieldError("TooMany", path, len(taints), "must have at most %d items" % MAX_TAINTS)]
    errs = []
    for i, t in enumerate(taints):
        p = "%s[%d]" % (path, i)
        if not isinstance(t, dict):
            errs.append(FieldError("Invalid", p, t, "must be an object"))
            continue
        key = t.get("key")
        prefix, _, name = (key or "").rpartition("/")
        if not key:
            errs.append(FieldError("Required", p + ".key"))
        elif (prefix and not DNS1123_SUBDOMAIN.match(prefix)) or len(prefix) > 253 or \
                not name or len(name) > 63 or not LABEL_VALUE.match(name):
            errs.append(FieldError("Invalid", p + ".key", key, "name part must consist of "
                                   "alphanumeric characters, '-', '_' or '.'"))
        v = t.get("value", "")
        if v and (not isinstance(v, str) or len(v) > 63 or not LABEL_VALUE.match(v)):
            errs.append(FieldError("Invalid", p + ".value", v, "a valid label must be an empty "
                                   "string or consist of alphanumeric characters"))
        eff = t.get("effect")
        if not eff:
            errs.append(FieldError("Required", p + ".effect"))
        elif eff not in TAINT_EFFECTS:
            errs.append(FieldError("NotSupported", p + ".effect", eff,
                                   "supported values: %s" % ", ".join(
                                       '"%s"' % e for e in sorted(TAINT_EFFECTS))))
    return errs


def default_taints(obj, now=None):
    """SetDefaults_DeviceTaint (pkg/apis/resource/v1/defaults.go): every device taint without
    timeAdded gets the time now, truncated to the second; on create and on update alike."""
    for d in ((obj.get("spec") or {}).get("devices") or []):
        for t in (d.get("taints") or []) if isinstance(d, dict) else []:
            if isinstance(t, dict) and not t.get("timeAdded"):
                t["timeAdded"] = now or now_rfc3339()


def drop_taints(obj):
    """dropDisabledDRADeviceTaintsFields: the gate off (1.33-1.35 by default) and the old
    slice without taints: every device's taints dropped, silently."""
    for d in ((obj.get("spec") or {}).get("devices") or []):
        if isinstance(d, dict):
            d.pop("taints", None)
_SUFFIX = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


def _qty(v):
    """A quantity's value (integer quantities with a binary or decimal suffix; others None)."""
    m = re.match(r"^([0-9]+)([kMGTPE]i?|Ki)?$", str(v))
    return int(m.group(1)) * _SUFFIX[m.group(2) or ""] if m and (m.group(2) or "") in _SUFFIX \
        else None


def _request_policy_errs(cap, pol, path):
    """validateRequestPolicy of pkg/apis/resource/validation (1.36), for integer quantities:
    one of validValues and validRange, default required with either and within it, min and
    max within the capacity."""
    if not isinstance(pol, dict):
        return [FieldError("Invalid", path, pol, "must be an object")]
    errs = []
    d = _qty(pol["default"]) if pol.get("default") is not None else None
    if pol.get("validValues") and pol.get("validRange") is not None:
        return [FieldError("Forbidden", path, None, 'exactly one policy can be specified, '
                           'cannot specify "validValues" and "validRange" at the same time')]
    if pol.get("validValues"):
        vals = [_qty(x) for x in pol["validValues"]]
        if d is None:
            errs.append(FieldError("Required", path + ".default", None,
                                   "required when validValues is defined"))
        elif d not in vals:
            errs.append(FieldError("Invalid", path + ".validValues", pol["default"],
                                   "default value is not valid according to the requestPolicy"))
    rng = pol.get("validRange")
    if rng is not None:
        lo = _qty(rng["min"]) if rng.get("min") is not None else None
        if d is None:
            errs.append(FieldError("Required", path + ".default", None,
                                   "required when validRange is defined"))
        if lo is None:
            errs.append(FieldError("Required", path + ".validRange.min", None,
                                   "required when validRange is defined"))
        else:
            if cap is not None and lo > cap:
                errs.append(FieldError("Invalid", path + ".validRange.min", rng["min"],
                                       "min is larger than capacity value"))
            if d is not None and d < lo:
                errs.append(FieldError("Invalid", path + ".validRange.min", pol["default"],
                                       "default is less than min"))
    if d is not None and cap is not None and d > cap:
        errs.append(FieldError("Invalid", path + ".default", pol["default"],
                               "default is larger than capacity value"))
    return errs


def drop_disabled_fields(obj):
    """What a 1.34/1.35 API server (DRAConsumableCapacity alpha, off) does with a slice it
    stores: allowMultipleAllocations and every capacity's requestPolicy are dropped."""
    for d in (obj.get("spec") or {}).get("devices") or []:
        if isinstance(d, dict):
            d.pop("allowMultipleAllocations", None)
            for c in (d.get("capacity") or {}).values():
                if isinstance(c, dict):
                    c.pop("requestPolicy", None)


def _device_errs(d, path):
    if not isinstance(d, dict):
        return [FieldError("Invalid", path, d, "must be an object")]
    errs = []
    name = d.get("name")
    if not isinstance(name, str) or name == "":
        errs.append(FieldError("Required", path + ".name"))
    else:
        errs += _label_errs(name, path + ".name")
    attrs = d.get("attributes") or {}
    caps = d.get("capacity") or {}
    if not isinstance(attrs, dict):
        errs.append(FieldError("Invalid", path + ".attributes", attrs, "must be a map"))
        attrs = {}
    if not isinstance(caps, dict):
        errs.append(FieldError("Invalid", path + ".capacity", caps, "must be a map"))
        caps = {}
    total = len(attrs) + len(caps)
    if total > MAX_ATTRS_AND_CAPS:
        errs.append(FieldError("Invalid", path, total,
                               "the total number of attributes and capacities must not exceed "
                               "%d" % MAX_ATTRS_AND_CAPS))
    for k in sorted(attrs):
        errs += _qualified_name_errs(k, path + ".attributes")
        errs += _attr_errs(attrs[k], _key(path + ".attributes", k))
    for k in sorted(caps):
        errs += _qualified_name_errs(k, path + ".capacity")
        errs += _quantity_errs(caps[k], _key(path + ".capacity", k),
                               d.get("allowMultipleAllocations") is True)
    if d.get("taints") is not None:
        errs += _taint_errs(d["taints"], path + ".taints")
    if any(d.get(f) is not None for f in ("nodeName", "nodeSelector", "allNodes")):
        errs.append(FieldError("Invalid", path, None,
                               "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
                               "`perDeviceNodeSelection` is set to true in the ResourceSlice "
                               "spec"))
    return errs


def validate_slice(obj, node_uids=None, require_node_owner=True):
    """[FieldError] for a ResourceSlice (ValidateResourceSlice + the owner rule)."""
    errs = []
    meta = obj.get("metadata") or {}
    name = meta.get("name", "")
    if name:
        errs += _subdomain_errs(name, "metadata.name")
    if meta.get("namespace"):
        errs.append(FieldError("Forbidden", "metadata.namespace", None,
                               "not allowed on this type"))
    owners = meta.get("ownerReferences") or []
    for i, o in enumerate(owners if isinstance(owners, list) else []):
        p = "metadata.ownerReferences[%d]" % i
        for f in ("apiVersion", "kind", "name", "uid"):
            if not (isinstance(o, dict) and o.get(f)):
                errs.append(FieldError("Invalid", p + "." + f, "",
                                       "%s must not be empty" % f))
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return errs + [FieldError("Required", "spec")]
    errs += _driver_errs(spec.get("driver"), "spec.driver")
    pool = spec.get("pool")
    if not isinstance(pool, dict):
        pool = {}
    pn = pool.get("name")
    if not isinstance(pn, str) or pn == "":
        errs.append(FieldError("Required", "spec.pool.name"))
    else:
        if len(pn) > MAX_POOL_NAME:
            errs.append(FieldError("TooLong", "spec.pool.name", "",
                                   "may not be more than %d bytes" % MAX_POOL_NAME))
        for part in pn.split("/"):
            errs += _subdomain_errs(part, "spec.pool.name")
    rsc = pool.get("resourceSliceCount")
    if not isinstance(rsc, int) or isinstance(rsc, bool) or rsc <= 0:
        errs.append(FieldError("Invalid", "spec.pool.resourceSliceCount",
                               rsc if rsc is not None else 0, "must be greater than zero"))
    gen = pool.get("generation", 0)
    if not isinstance(gen, int) or isinstance(gen, bool) or gen < 0:
        errs.append(FieldError("Invalid", "spec.pool.generation", gen,
                               "must be greater than or equal to zero"))
    setf = []
    nn = spec.get("nodeName")
    if nn is not None:
        if nn != "":
            setf.append("`nodeName`")
            errs += _subdomain_errs(nn, "spec.nodeName")
        else:
            errs.append(FieldError("Invalid", "spec.nodeName", "",
                                   "must be either unset or set to a non-empty string"))
    if spec.get("nodeSelector") is not None:
        setf.append("`nodeSelector`")
        terms = (spec["nodeSelector"] or {}).get("nodeSelectorTerms") or []
        if len(terms) != 1:
            errs.append(FieldError("Invalid", "spec.nodeSelector.nodeSelectorTerms", terms,
                                   "must have exactly one node selector term"))
    for f in ("allNodes", "perDeviceNodeSelection"):
        if spec.get(f) is not None:
            if spec[f] is True:
                setf.append("`%s`" % f)
            else:
                errs.append(FieldError("Invalid", "spec." + f, spec[f],
                                       "must be either unset or set to true"))
    if not setf:
        errs.append(FieldError("Required", "spec", None,
                               "exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                               "`perDeviceNodeSelection` is required"))
    elif len(setf) > 1:
        errs.append(FieldError("Invalid", "spec", "{%s}" % ", ".join(setf),
                               "exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                               "`perDeviceNodeSelection` is required, but multiple fields are "
                               "set"))
    devs = spec.get("devices")
    if devs is not None and not isinstance(devs, list):
        errs.append(FieldError("Invalid", "spec.devices", devs, "must be a list"))
    elif devs:
        tainted = any(isinstance(d, dict) and d.get("taints") for d in devs)
        limit = MAX_DEVICES_WITH_TAINTS if tainted else MAX_DEVICES
        if len(devs) > limit:
            errs.append(FieldError("TooMany", "spec.devices", len(devs),
                                   "must have at most %d items" % limit))
        else:
            seen = set()
            for i, d in enumerate(devs):
                errs += _device_errs(d, "spec.devices[%d]" % i)
            for i, d in enumerate(devs):
                n = d.get("name") if isinstance(d, dict) else None
                if n in seen:
                    errs.append(FieldError("Duplicate", "spec.devices[%d]" % i, n))
                seen.add(n)
    if require_node_owner and isinstance(nn, str) and nn:
        want = (node_uids or {}).get(nn)
        ok = any(isinstance(o, dict) and o.get("apiVersion") == "v1" and
                 o.get("kind") == "Node" and o.get("name") == nn and
                 want is not None and o.get("uid") == want for o in
                 (owners if isinstance(owners, list) else []))
        if not ok:
            errs.append(FieldError("Invalid", "metadata.ownerReferences", owners,
                                   "(fake apiserver rule) a slice for node %s must be owned by "
                                   "Node %s (apiVersion v1, kind Node, uid %s)" % (nn, nn, want)))
    return errs


_GO_TYPES = {bool: "bool", int: "number", float: "number", str: "string", list: "array",
             dict: "object", type(None): "null"}


def decode_error(obj):
    """The apiserver decodes JSON into Go structs before validating: a value of the wrong JSON
    type is a 400 BadRequest ("cannot be handled as a ResourceSlice: json: cannot unmarshal
    ..."), not a 422. Returns that message or None (checks the typed fields a driver writes)."""

    def bad(v, want, where, gotype):
        ok = {"int": lambda x: isinstance(x, int) and not isinstance(x, bool),
              "bool": lambda x: isinstance(x, bool), "string": lambda x: isinstance(x, str),
              "array": lambda x: isinstance(x, list), "object": lambda x: isinstance(x, dict)}
        if v is None or ok[want](v):
            return None
        return ('ResourceSlice in version "v1" cannot be handled as a ResourceSlice: json: '
                'cannot unmarshal %s into Go struct field %s of type %s' % (
                    _GO_TYPES.get(type(v), "value"), where, gotype))

    checks = []
    meta = obj.get("metadata")
    checks.append((meta, "object", "ResourceSlice.metadata", "v1.ObjectMeta"))
    spec = obj.get("spec")
    checks.append((spec, "object", "ResourceSlice.spec", "v1.ResourceSliceSpec"))
    if isinstance(spec, dict):
        checks += [(spec.get("driver"), "string", "ResourceSliceSpec.spec.driver", "string"),
                   (spec.get("nodeName"), "string", "ResourceSliceSpec.spec.nodeName", "string"),
                   (spec.get("allNodes"), "bool", "ResourceSliceSpec.spec.allNodes", "bool"),
                   (spec.get("pool"), "object", "ResourceSliceSpec.spec.pool", "v1.ResourcePool"),
                   (spec.get("devices"), "array", "ResourceSliceSpec.spec.devices",
                    "[]v1.Device")]
        pool = spec.get("pool")
        if isinstance(pool, dict):
            checks += [(pool.get("name"), "string", "ResourcePool.spec.pool.name", "string"),
                       (pool.get("generation"), "int", "ResourcePool.spec.pool.generation",
                        "int64"),
                       (pool.get("resourceSliceCount"), "int",
                        "ResourcePool.spec.pool.resourceSliceCount", "int64")]
        for d in spec.get("devices") if isinstance(spec.get("devices"), list) else []:
            checks.append((d, "object", "ResourceSliceSpec.spec.devices", "v1.Device"))
            if not isinstance(d, dict):
                continue
            checks += [(d.get("name"), "string", "Device.spec.devices.name", "string"),
                       (d.get("attributes"), "object", "Device.spec.devices.attributes",
                        "map[v1.QualifiedName]v1.DeviceAttribute"),
                       (d.get("capacity"), "object", "Device.spec.devices.capacity",
                        "map[v1.QualifiedName]v1.DeviceCapacity")]
            attrs = d.get("attributes")
            for a in attrs.values() if isinstance(attrs, dict) else []:
                checks.append((a, "object", "Device.spec.devices.attributes",
                               "v1.DeviceAttribute"))
                if isinstance(a, dict):
                    for f, t, g in (("int", "int", "int64"), ("bool", "bool", "bool"),
                                    ("string", "string", "string"),
                                    ("version", "string", "string")):
                        checks.append((a.get(f), t, "DeviceAttribute.spec.devices.attributes."
                                       + f, g))
    for v, want, where, gotype in checks:
        m = bad(v, want, where, gotype)
        if m:
            return m
    return None


def unknown_fields(obj):
    """JSON paths of fields a 1.34 apiserver does not know (reported as warnings)."""
    out = []

    def extra(d, known, path):
        if isinstance(d, dict):
            out.extend("%s.%s" % (path, k) if path else k for k in d if k not in known)

    extra(obj, {"apiVersion", "kind", "metadata", "spec"}, "")
    extra(obj.get("metadata"), META_FIELDS, "metadata")
    spec = obj.get("spec")
    extra(spec, SPEC_FIELDS, "spec")
    if isinstance(spec, dict):
        extra(spec.get("pool"), POOL_FIELDS, "spec.pool")
        for i, d in enumerate(spec.get("devices") or []):
            p = "spec.devices[%d]" % i
            extra(d, DEVICE_FIELDS, p)
            if isinstance(d, dict):
                for k, a in (d.get("attributes") or {}).items():
                    extra(a, ATTR_FIELDS, "%s.attributes.%s" % (p, k))
                for k, c in (d.get("capacity") or {}).items():
                    extra(c, CAP_FIELDS, "%s.capacity.%s" % (p, k))
    return out


# -- Status bodies --------------------------------------------------------------------------------
def status(code, reason, message, details=None):
    s = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": message, "reason": reason, "code": code}
    if details is not None:
        s["details"] = details
    return s


def not_found(resource, name, group=GROUP):
    qual = resource + ("." + group if group else "")
    d = {"name": name, "kind": resource}
    if group:
        d["group"] = group
    return status(404, "NotFound", '%s "%s" not found' % (qual, name), d)


def conflict(resource, name, why):
    return status(409, "Conflict", 'Operation cannot be fulfilled on %s.%s "%s": %s' % (
        resource, GROUP, name, why), {"name": name, "group": GROUP, "kind": resource})


def invalid(kind, name, errs):
    msgs = [e.error() for e in errs]
    agg = msgs[0] if len(msgs) == 1 else "[" + ", ".join(msgs) + "]"
    return status(422, "Invalid", '%s.%s "%s" is invalid: %s' % (kind, GROUP, name, agg),
                  {"name": name, "group": GROUP, "kind": kind,
                   "causes": [e.cause() for e in errs]})


def _list_item(obj):
    """Items of a typed list carry no apiVersion/kind, as the real apiserver sends them."""
    o = json.loads(json.dumps(obj))
    o.pop("apiVersion", None)
    o.pop("kind", None)
    return o


def _managed(m, user_agent, op):
    """metadata.managedFields as the apiserver's field manager records a create/update (the
    manager is the User-Agent's first word)."""
    mgr = (user_agent or "unknown").split("/")[0].split(" ")[0] or "unknown"
    m["managedFields"] = [{"manager": mgr, "operation": op, "apiVersion": GROUP + "/v1",
                           "time": now_rfc3339(), "fieldsType": "FieldsV1",
                           "fieldsV1": {"f:metadata": {}, "f:spec": {}}}]


GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand


class HangUp(Exception):
    """Close the connection without an answer."""


# -- the server -----------------------------------------------------------------------------------
class _TLSServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, addr, handler, owner):
        self.owner = owner
        super().__init__(addr, handler)

    def get_request(self):
        sock, addr = self.socket.accept()
        return sock, addr

    def process_request_thread(self, request, client_address):
        # TLS handshake in the connection's thread: a client stalling its handshake never
        # blocks the accept loop.
        o = self.owner
        with o._lock:
            o._conns.add(request)
            o.accepted += 1
        try:
            mode = o._outage
            if mode == "stall":  # accepted, but no TLS handshake until the outage ends
                while not o._released.wait(0.1) and not o._stopping.is_set():
                    pass
                return
            if mode == "reset":
                request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            request.settimeout(o.idle_timeout)
            try:
                tls = o._ctx.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError) as e:
                with o._lock:
                    o.tls_errors.append(repr(e))
                return
            with o._lock:
                o._conns.add(tls)
            try:
                self.finish_request(tls, client_address)
            except Exception:  # noqa: BLE001 - a broken client connection
                pass
            finally:
                with o._lock:
                    o._conns.discard(tls)
                try:
                    tls.close()
                except OSError:
                    pass
        finally:
            with o._lock:
                o._conns.discard(request)
            self.shutdown_request(request)

    def handle_error(self, request, client_address):
        pass


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-kube-apiserver"
    sys_version = ""
    # Go's net package sets TCP_NODELAY on every connection, kube-apiserver's included. Without
    # it the headers and the body go out as two segments and the second waits for the
    # client's delayed ACK: 40 ms per response, which no real API server costs.
    disable_nagle_algorithm = True

    def log_message(self, *a):
        pass

    def _serve(self):
        self.server.owner._handle(self)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve


class FakeAPIServer:
    """The fake apiserver. start() returns self; stop() closes everything.

    Attributes for tests: base_url, ca_path, token_file, token (current), log (list of dicts:
    t, method, path, query, token, status, body, content_type), warnings (unknown fields seen),
    tls_errors; knobs: latency (s), idle_timeout (s), require_node_owner."""

    def __init__(self, node="node-a", node_uid=None, sans=DEFAULT_SANS, workdir=None,
                 token=None, require_node_owner=True, port=0):
        self.dir = pathlib.Path(workdir or tempfile.mkdtemp(dir="/tmp", prefix="rdpapi"))
        self._own_dir = workdir is None
        self.pki = cached_pki(sans)
        self.ca_path = self.pki["ca"]
        self._ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        self._ctx.load_cert_chain(self.pki["cert"], self.pki["key"])
        self._ctx.set_alpn_protocols(["http/1.1"])
        self._lock = threading.RLock()
        self.cond = threading.Condition(self._lock)
        self._conns = set()
        self._server = None
        self._thread = None
        self.port = port
        # DRAConsumableCapacity: beta and on since 1.36; False models 1.34/1.35 (alpha, off)
        self.consumable_capacity = True
        self.latency = 0.0
        self.idle_timeout = 120.0
        self.require_node_owner = require_node_owner
        # DRADeviceTaints: on (1.36+) keeps device taints, defaulting timeAdded; off (1.33-1.35
        # by default) drops them from every write (unless the old slice has some).
        self.device_taints = True
        self._outage = None
        self._released = threading.Event()
        self._released.set()
        self._stopping = threading.Event()
        self._faults = []
        self.log = []
        self.warnings = []
        self.tls_errors = []
        self.accepted = 0  # TCP connections accepted (keep-alive reuse shows as few)
        self.rv = 1
        self.nodes = {}
        self._slices = {}
        self._claims = {}
        self._ns_labels = {}
        self._tokens = {}  # token -> expiry (monotonic) or None
        self.token_dir = self.dir / "serviceaccount"
        self.token_file = self.token_dir / "token"
        self.token = None
        self.set_token(token or self.new_token())
        if node:
            self.add_node(node, node_uid)

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self):
        self._stopping.clear()
        self._listen()
        return self

    def _listen(self):
        self._server = _TLSServer(("127.0.0.1", self.port), _Handler, self)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def _unlisten(self):
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(10)
            self._server = None
        self.drop_connections()

    def stop(self):
        self._stopping.set()
        self._released.set()
        self._unlisten()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def drop_connections(self):
        """Closes every open client connection (as an apiserver restart does)."""
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    @property
    def base_url(self):
        return "https://127.0.0.1:%d" % self.port

    @property
    def server_name(self):
        return "kubernetes.default.svc"

    # -- tokens ------------------------------------------------------------------------------------
    @staticmethod
    def new_token():
        return "tok-" + uuid.uuid4().hex

    def add_token(self, token, ttl=None):
        with self._lock:
            self._tokens[token] = None if ttl is None else time.monotonic() + ttl
        return token

    def revoke_token(self, token):
        with self._lock:
            self._tokens.pop(token, None)

    def token_valid(self, token):
        with self._lock:
            if token not in self._tokens:
                return False
            exp = self._tokens[token]
            return exp is None or time.monotonic() < exp

    def set_token(self, token):
        """Makes token valid and writes it as the projected token file (AtomicWriter layout:
        token -> ..data/token, ..data -> ..<timestamp>/, swapped by a symlink rename)."""
        self.add_token(token)
        self.token = token
        self.token_dir.mkdir(parents=True, exist_ok=True)
        stamp = "..%s.%d" % (time.strftime("%Y_%m_%d_%H_%M_%S"), time.monotonic_ns())
        ts = self.token_dir / stamp
        ts.mkdir()
        (ts / "token").write_text(token)
        os.chmod(ts / "token", 0o600)
        tmp = self.token_dir / "..data_tmp"
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(stamp, tmp)
        old = os.readlink(self.token_dir / "..data") if os.path.lexists(
            self.token_dir / "..data") else None
        os.rename(tmp, self.token_dir / "..data")
        if not os.path.lexists(self.token_file):
            os.symlink("..data/token", self.token_file)
        if old:
            shutil.rmtree(self.token_dir / old, ignore_errors=True)
        return token

    def rotate_token(self, grace=None, new=None):
        """Writes a new token to the token file; the old one stays valid for `grace` seconds
        (None: until revoke_token). Returns (old, new)."""
        old = self.token
        new = self.set_token(new or self.new_token())
        if grace is not None:
            with self._lock:
                if old in self._tokens:
                    self._tokens[old] = time.monotonic() + grace
        return old, new

    # -- faults ------------------------------------------------------------------------------------
    def outage(self, mode):
        """None: healthy. "refuse": the port is closed (ECONNREFUSED) and open connections are
        dropped. "hang": requests are read and never answered (until the outage ends; then the
        connection is closed). "stall": new connections are accepted by the kernel but never
        get a TLS handshake (until the outage ends). "reset": connections are accepted and
        reset. An int: every
        request is answered with that code and a Status (500 InternalError, 503
        ServiceUnavailable, 429 TooManyRequests with Retry-After: 1, ...)."""
        prev = self._outage
        self._outage = mode
        if mode in ("hang", "stall"):
            self._released.clear()
        else:
            self._released.set()
        if mode == "refuse" and prev != "refuse":
            self._unlisten()
        elif prev == "refuse" and mode != "refuse":
            self._listen()
        if mode in ("reset",):
            self.drop_connections()

    def inject(self, status_or_mode, method=None, path=None, count=1):
        """One-shot faults: the next `count` requests matching method and the path regex
        (search) get the code (a Status) or "hang"/"reset"."""
        with self._lock:
            self._faults.append({"what": status_or_mode, "method": method,
                                 "path": re.compile(path) if path else None, "count": count})

    def _take_fault(self, method, path):
        with self._lock:
            for f in self._faults:
                if (f["method"] is None or f["method"] == method) and \
                        (f["path"] is None or f["path"].search(path)):
                    f["count"] -= 1
                    if f["count"] <= 0:
                        self._faults.remove(f)
                    return f["what"]
        return None

    # -- objects ----------------------------------------------------------------------------------
    def _next_rv(self):
        self.rv += 1
        return str(self.rv)

    def add_node(self, name, uid=None):
        with self._lock:
            uid = uid or str(uuid.uuid4())
            self.nodes[name] = {"kind": "Node", "apiVersion": "v1", "metadata": {
                "name": name, "uid": uid, "resourceVersion": self._next_rv(),
                "creationTimestamp": now_rfc3339(),
                "labels": {"kubernetes.io/hostname": name}}, "spec": {}, "status": {}}
        return uid

    def node_uid(self, name):
        return self.nodes[name]["metadata"]["uid"]

    def slices(self, node=None, driver=None):
        """Deep copies of the stored slices, sorted by name, optionally filtered."""
        with self._lock:
            out = [json.loads(json.dumps(s)) for _, s in sorted(self._slices.items())]
        return [s for s in out if (node is None or s["spec"].get("nodeName") == node) and
                (driver is None or s["spec"].get("driver") == driver)]

    def devices(self, node=None, driver=None):
        """{device name: device} over the stored slices (of the highest pool generation)."""
        sl = self.slices(node, driver)
        if not sl:
            return {}
        top = max(s["spec"]["pool"].get("generation", 0) for s in sl)
        out = {}
        for s in sl:
            if s["spec"]["pool"].get("generation", 0) == top:
                for d in s["spec"].get("devices") or []:
                    out[d["name"]] = d
        return out

    def add_slice(self, obj):
        """Stores a slice as if someone else created it (no validation); returns it."""
        with self._lock:
            o = json.loads(json.dumps(obj))
            m = o.setdefault("metadata", {})
            if not m.get("name"):
                m["name"] = m.get("generateName", "slice-") + "".join(
                    random.choice(GENERATE_ALPHABET) for _ in range(5))
            self._stamp(o)
            self._slices[m["name"]] = o
            self.cond.notify_all()
            return json.loads(json.dumps(o))

    def delete_slices(self, node=None, driver=None):
        with self._lock:
            for s in self.slices(node, driver):
                self._slices.pop(s["metadata"]["name"], None)
            self._next_rv()
            self.cond.notify_all()

    def _stamp(self, o, create=True):
        m = o["metadata"]
        if create:
            m["uid"] = str(uuid.uuid4())
            m["creationTimestamp"] = now_rfc3339()
            m["generation"] = 1
        m["resourceVersion"] = self._next_rv()

    ADMIN_LABEL = "resource.kubernetes.io/admin-access"

    def label_namespace(self, namespace, labels):
        """Sets a namespace's labels (test API; namespaces exist implicitly)."""
        with self._lock:
            self._ns_labels[namespace] = dict(labels)

    def put_claim(self, claim):
        """Creates or replaces a ResourceClaim (test API); uid/creationTimestamp are kept when
        given; resourceVersion is set. Returns a copy. As the 1.36+ API server
        (pkg/registry/resource/resourceclaim strategy, DRAAdminAccess): a claim with an
        admin-access request or result is refused (ValueError) unless its namespace carries the
        label resource.kubernetes.io/admin-access=true."""
        with self._lock:
            c = json.loads(json.dumps(claim))
            m = c.setdefault("metadata", {})
            reqs = ((c.get("spec") or {}).get("devices") or {}).get("requests") or []
            res = ((((c.get("status") or {}).get("allocation") or {}).get("devices") or {})
                   .get("results") or [])
            admin = any((r.get("exactly") or {}).get("adminAccess") for r in reqs) or \
                any(r.get("adminAccess") for r in res)
            ns = m.get("namespace", "default")
            if admin and self._ns_labels.get(ns, {}).get(self.ADMIN_LABEL) != "true":
                raise ValueError("admin access to devices requires the `%s: true` label on "
                                 "the containing namespace %s" % (self.ADMIN_LABEL, ns))
            c.setdefault("apiVersion", GROUP + "/v1")
            c.setdefault("kind", "ResourceClaim")
            m.setdefault("namespace", "default")
            m.setdefault("uid", str(uuid.uuid4()))
            m.setdefault("creationTimestamp", now_rfc3339())
            m["resourceVersion"] = self._next_rv()
            self._claims[(m["namespace"], m["name"])] = c
            return json.loads(json.dumps(c))

    def delete_claim(self, namespace, name):
        with self._lock:
            return self._claims.pop((namespace, name), None) is not None

    def get_claim(self, namespace, name):
        with self._lock:
            c = self._claims.get((namespace, name))
            return json.loads(json.dumps(c)) if c else None

    # -- requests ----------------------------------------------------------------------------------
    def requests(self, method=None, path=None, status=None):
        """Log entries matching method, a path regex (search) and status."""
        with self._lock:
            return [e for e in self.log if (method is None or e["method"] == method) and
                    (path is None or re.search(path, e["path"])) and
                    (status is None or e["status"] == status)]

    def wait(self, pred, timeout=30, what="condition"):
        """Waits until pred() is true (checked on every change and every 0.1 s)."""
        return waits.wait_until(self.cond, pred, timeout, lambda: (
            "fake apiserver: timed out waiting for %s; slices=%r last requests=%r" % (
                what, [s["metadata"]["name"] for s in self._slices.values()],
                [(e["method"], e["path"], e["status"]) for e in self.log[-8:]])), step=0.1)

    def _read_body(self, h):
        te = h.headers.get("Transfer-Encoding", "").lower()
        if te == "chunked":
            data = b""
            while True:
                line = h.rfile.readline(1024)
                n = int(line.split(b";")[0].strip() or b"0", 16)
                if n == 0:
                    while h.rfile.readline(1024).strip():
                        pass
                    return data
                data += h.rfile.read(n)
                h.rfile.readline(16)
                if len(data) > MAX_BODY:
                    raise ValueError("too large")
        n = int(h.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            left = min(n, 64 * MAX_BODY)  # drain it, so the client gets to read the 413
            while left > 0:
                b = h.rfile.read(min(left, 65536))
                if not b:
                    break
                left -= len(b)
            h.close_connection = True
            raise ValueError("too large")
        return h.rfile.read(n) if n else b""

    def _handle(self, h):
        t0 = time.monotonic()
        url = urllib.parse.urlsplit(h.path)
        path = url.path
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        auth = h.headers.get("Authorization", "")
        token = auth[7:].strip() if auth.startswith("Bearer ") else None
        entry = {"t": time.time(), "method": h.command, "path": path, "query": query,
                 "raw_query": url.query, "token": token, "status": None, "body": None,
                 "content_type": h.headers.get("Content-Type"),
                 "accept": h.headers.get("Accept"), "user_agent": h.headers.get("User-Agent")}
        code, obj, extra = 500, None, {}
        try:
            try:
                raw = self._read_body(h)
            except ValueError:
                raw = None
            if raw:
                try:
                    entry["body"] = json.loads(raw)
                except ValueError:
                    entry["body"] = raw[:4096]
            fault = self._take_fault(h.command, path)
            mode = fault if fault is not None else self._outage
            if mode == "hang":
                self._hang()
            if mode == "reset":
                raise HangUp()
            if self.latency:
                time.sleep(self.latency)
            if isinstance(mode, int):
                code, obj, extra = self._fault_status(mode)
            elif raw is None:
                code, obj = 413, status(413, "RequestEntityTooLarge",
                                        "the request is too large")
            elif token is None or not self.token_valid(token):
                code, obj = 401, status(401, "Unauthorized", "Unauthorized")
            else:
                code, obj, extra = self._route(h.command, path, query, raw, h.headers)
        except HangUp:
            entry["status"] = "hangup"
            with self._lock:
                self.log.append(entry)
                self.cond.notify_all()
            h.close_connection = True
            try:
                h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        entry["status"] = code
        entry["elapsed"] = time.monotonic() - t0
        with self._lock:
            self.log.append(entry)
            self.cond.notify_all()
        body = (json.dumps(obj, separators=(",", ":")) + "\n").encode() if obj is not None \
            else b""
        h.send_response(code)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Audit-Id", str(uuid.uuid4()))
        h.send_header("Cache-Control", "no-cache, private")
        for k, v in extra.items():
            h.send_header(k, v)
        if h.close_connection:
            h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.write(body)
        h.wfile.flush()

    def _hang(self):
        while not self._released.wait(0.1):
            if self._stopping.is_set():
                break
        raise HangUp()

    @staticmethod
    def _fault_status(code):
        reasons = {500: ("InternalError", "Internal error occurred: injected"),
                   503: ("ServiceUnavailable", "the server is currently unable to handle the "
                         "request"),
                   504: ("Timeout", "the server was unable to return a response in the time "
                         "allotted, but may still be processing the request"),
                   429: ("TooManyRequests", "the server has received too many requests and has "
                         "asked us to try again later"),
                   409: ("Conflict", "injected conflict"),
                   401: ("Unauthorized", "Unauthorized")}
        reason, msg = reasons.get(code, ("InternalError", "injected error %d" % code))
        extra = {"Retry-After": "1"} if code in (429, 503) else {}
        return code, status(code, reason, msg), extra

    # -- routing -----------------------------------------------------------------------------------
    def _route(self, method, path, query, raw, headers):
        parts = [p for p in path.split("/") if p]
        watch = query.get("watch", [""])[0] in ("1", "true")
        if parts[:3] == ["api", "v1", "nodes"] and len(parts) == 4:
            if method != "GET":
                return self._not_allowed(method)
            with self._lock:
                n = self.nodes.get(parts[3])
                if n is None:
                    return 404, not_found("nodes", parts[3], group=""), {}
                return 200, json.loads(json.dumps(n)), {}
        if path.rstrip("/") == SLICES:
            if watch:
                return self._watch(query)
            if method == "GET":
                return self._list_slices(query)
            if method == "POST":
                return self._create_slice(raw, headers)
            if method == "DELETE":
                return self._delete_collection(query)
            return self._not_allowed(method)
        if path.startswith(SLICES + "/") and len(parts) == 5:
            name = parts[4]
            if method == "GET":
                with self._lock:
                    s = self._slices.get(name)
                    if s is None:
                        return 404, not_found("resourceslices", name), {}
                    return 200, json.loads(json.dumps(s)), {}
            if method == "PUT":
                return self._update_slice(name, raw, headers)
            if method == "DELETE":
                return self._delete_slice(name, raw)
            return self._not_allowed(method)
        if parts[:4] == ["apis", GROUP, "v1", "namespaces"] and len(parts) == 7 and \
                parts[5] == "resourceclaims":
            if method != "GET":
                return self._not_allowed(method)
            c = self.get_claim(parts[4], parts[6])
            if c is None:
                return 404, not_found("resourceclaims", parts[6]), {}
            return 200, c, {}
        return 404, status(404, "NotFound", "the server could not find the requested resource",
                           {"causes": [{"reason": "UnexpectedServerResponse",
                                        "message": "404 page not found"}]}), {}

    @staticmethod
    def _not_allowed(method):
        return 405, status(405, "MethodNotAllowed",
                           "the server does not allow this method on the requested resource"), {}

    def _watch(self, query):
        rv = query.get("resourceVersion", [""])[0]
        with self._lock:
            cur = self.rv
        if rv and rv.isdigit() and int(rv) < cur:
            return 410, status(410, "Expired", "too old resource version: %s (%d)" % (rv, cur)), {}
        return self._not_allowed("GET")

    @staticmethod
    def _parse_selector(query):
        """[(field, op, value)] of fieldSelector, or an error string."""
        sel = query.get("fieldSelector", [""])[0]
        out = []
        for term in filter(None, sel.split(",")):
            m = re.match(r"^([^!=]+)(!=|==|=)(.*)$", term)
            if not m:
                return None, "invalid selector: '%s'; can't understand '%s'" % (sel, term)
            f, op, v = m.groups()
            if f not in ("metadata.name", "metadata.namespace", "spec.nodeName", "spec.driver"):
                return None, 'field label not supported: %s' % f
            out.append((f, op, v))
        return out, None

    @staticmethod
    def _matches(s, sel):
        vals = {"metadata.name": s["metadata"]["name"], "metadata.namespace": "",
                "spec.nodeName": s["spec"].get("nodeName") or "",
                "spec.driver": s["spec"].get("driver", "")}
        for f, op, v in sel:
            if (vals[f] == v) != (op != "!="):
                return False
        return True

    def _list_slices(self, query):
        sel, err = self._parse_selector(query)
        if err:
            return 400, status(400, "BadRequest", err), {}
        with self._lock:
            items = [_list_item(s) for _, s in sorted(self._slices.items())
                     if self._matches(s, sel)]
            return 200, {"kind": "ResourceSliceList", "apiVersion": GROUP + "/v1",
                         "metadata": {"resourceVersion": str(self.rv)}, "items": items}, {}

    def _delete_collection(self, query):
        sel, err = self._parse_selector(query)
        if err:
            return 400, status(400, "BadRequest", err), {}
        with self._lock:
            gone = [n for n, s in sorted(self._slices.items()) if self._matches(s, sel)]
            items = [_list_item(self._slices.pop(n)) for n in gone]
            self._next_rv()
            self.cond.notify_all()
            return 200, {"kind": "ResourceSliceList", "apiVersion": GROUP + "/v1",
                         "metadata": {"resourceVersion": str(self.rv)}, "items": items}, {}

    def _decode(self, raw, headers):
        ct = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ct != "application/json":
            return None, (415, status(415, "UnsupportedMediaType",
                                      'the body of the request was in an unknown format - '
                                      'accepted media types include: application/json, '
                                      'application/yaml, application/vnd.kubernetes.protobuf'), {})
        try:
            obj = json.loads(raw)
        except ValueError as e:
            return None, (400, status(400, "BadRequest", "the object provided is unrecognized "
                                      "(must be of type ResourceSlice): %s" % e), {})
        if not isinstance(obj, dict):
            return None, (400, status(400, "BadRequest", "the object provided is unrecognized"),
                          {})
        derr = decode_error(obj)
        if derr:
            return None, (400, status(400, "BadRequest", derr), {})
        if obj.get("apiVersion") != GROUP + "/v1" or obj.get("kind") != "ResourceSlice":
            return None, (400, status(400, "BadRequest",
                                      "the API version in the data (%s) does not match the "
                                      "expected API version (%s/v1)" % (
                                          obj.get("apiVersion"), GROUP)
                                      if obj.get("apiVersion") != GROUP + "/v1" else
                                      "the object provided is unrecognized (must be of type "
                                      "ResourceSlice): kind %r" % obj.get("kind")), {})
        return obj, None

    def _warn(self, obj):
        unk = unknown_fields(obj)
        with self._lock:
            self.warnings.extend(unk)
        if not unk:
            return {}
        return {"Warning": ", ".join('299 - "unknown field \\"%s\\""' % u for u in unk)}

    def _create_slice(self, raw, headers):
        obj, err = self._decode(raw, headers)
        if err:
            return err
        m = obj.setdefault("metadata", {})
        if not isinstance(m, dict):
            return 400, status(400, "BadRequest", "metadata must be an object"), {}
        with self._lock:
            if not m.get("name"):
                if not m.get("generateName"):
                    e = FieldError("Required", "metadata.name", None,
                                   "name or generateName is required")
                    return 422, invalid("ResourceSlice", "", [e]), {}
                base = m["generateName"][:58]
                m["name"] = base + "".join(random.choice(GENERATE_ALPHABET) for _ in range(5))
            for f in ("uid", "resourceVersion", "creationTimestamp", "generation"):
                m.pop(f, None)
            default_taints(obj)
            if not self.device_taints:
                drop_taints(obj)
            if not self.consumable_capacity:
                drop_disabled_fields(obj)
            errs = validate_slice(obj, {n: v["metadata"]["uid"] for n, v in self.nodes.items()},
                                  self.require_node_owner)
            if errs:
                return 422, invalid("ResourceSlice", m["name"], errs), {}
            if m["name"] in self._slices:
                return 409, status(409, "AlreadyExists",
                                   'resourceslices.%s "%s" already exists' % (GROUP, m["name"]),
                                   {"name": m["name"], "group": GROUP,
                                    "kind": "resourceslices"}), {}
            extra = self._warn(obj)
            self._stamp(obj)
            _managed(m, headers.get("User-Agent"), "Update")
            self._slices[m["name"]] = obj
            self.cond.notify_all()
            return 201, json.loads(json.dumps(obj)), extra

    def _update_slice(self, name, raw, headers):
        obj, err = self._decode(raw, headers)
        if err:
            return err
        m = obj.setdefault("metadata", {})
        with self._lock:
            if m.get("name") != name:
                return 400, status(400, "BadRequest",
                                   "the name of the object (%s) does not match the name on the "
                                   "URL (%s)" % (m.get("name"), name)), {}
            old = self._slices.get(name)
            if old is None:
                return 404, not_found("resourceslices", name), {}
            om = old["metadata"]
            if m.get("uid") and m["uid"] != om["uid"]:
                return 409, conflict("resourceslices", name,
                                     "Precondition failed: UID in precondition: %s, UID in "
                                     "object meta: %s" % (m["uid"], om["uid"])), {}
            if m.get("resourceVersion") and m["resourceVersion"] != om["resourceVersion"]:
                return 409, conflict("resourceslices", name,
                                     "the object has been modified; please apply your changes "
                                     "to the latest version and try again"), {}
            default_taints(obj)
            if not self.device_taints and not any(
                    d.get("taints") for d in old["spec"].get("devices") or []):
                drop_taints(obj)
            if not self.consumable_capacity:
                drop_disabled_fields(obj)
            errs = validate_slice(obj, {n: v["metadata"]["uid"] for n, v in self.nodes.items()},
                                  self.require_node_owner)
            ospec, nspec = old["spec"], obj.get("spec") or {}
            for f, p in (("driver", "spec.driver"), ("nodeName", "spec.nodeName")):
                if nspec.get(f) != ospec.get(f):
                    errs.append(FieldError("Invalid", p, nspec.get(f), "field is immutable"))
            if (nspec.get("pool") or {}).get("name") != ospec["pool"].get("name"):
                errs.append(FieldError("Invalid", "spec.pool.name",
                                       (nspec.get("pool") or {}).get("name"),
                                       "field is immutable"))
            if errs:
                return 422, invalid("ResourceSlice", name, errs), {}
            extra = self._warn(obj)
            for f in ("uid", "creationTimestamp"):
                m[f] = om[f]
            m["generation"] = om.get("generation", 1) + (1 if nspec != ospec else 0)
            m["resourceVersion"] = self._next_rv()
            _managed(m, headers.get("User-Agent"), "Update")
            self._slices[name] = obj
            self.cond.notify_all()
            return 200, json.loads(json.dumps(obj)), extra

    def _delete_slice(self, name, raw):
        pre = {}
        if raw:
            try:
                pre = (json.loads(raw) or {}).get("preconditions") or {}
            except (ValueError, AttributeError):
                return 400, status(400, "BadRequest", "invalid DeleteOptions"), {}
        with self._lock:
            s = self._slices.get(name)
            if s is None:
                return 404, not_found("resourceslices", name), {}
            m = s["metadata"]
            if pre.get("uid") and pre["uid"] != m["uid"]:
                return 409, conflict("resourceslices", name,
                                     "Precondition failed: UID in precondition: %s, UID in "
                                     "object meta: %s" % (pre["uid"], m["uid"])), {}
            if pre.get("resourceVersion") and pre["resourceVersion"] != m["resourceVersion"]:
                return 409, conflict("resourceslices", name,
                                     "Precondition failed: ResourceVersion in precondition: %s, "
                                     "ResourceVersion in object meta: %s" % (
                                         pre["resourceVersion"], m["resourceVersion"])), {}
            del self._slices[name]
            self._next_rv()
            self.cond.notify_all()
            return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                         "status": "Success", "details": {"name": name, "group": GROUP,
                                                          "kind": "resourceslices",
                                                          "uid": m["uid"]}}, {}


# -- a client for tests and the kubelet stand-in ---------------------------------------------------
class Client:
    """A minimal HTTPS+bearer JSON client (http.client, one keep-alive connection) verifying
    the server as kubernetes.default.svc with the CA. request() -> (status, body object)."""

    def __init__(self, base_url, ca_path, token=None, token_file=None, timeout=10,
                 server_name="kubernetes.default.svc"):
        import http.client
        self._hc = http.client
        u = urllib.parse.urlsplit(base_url)
        self.host, self.port = u.hostname, u.port
        self.ctx = ssl.create_default_context(cafile=str(ca_path))
        self.server_name = server_name
        self.token, self.token_file, self.timeout = token, token_file, timeout
        self.conn = None

    def _connect(self):
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        tls = self.ctx.wrap_socket(sock, server_hostname=self.server_name)
        c = self._hc.HTTPConnection(self.host, self.port, timeout=self.timeout)
        c.sock = tls
        return c

    def request(self, method, path, body=None, headers=None, content_type="application/json"):
        tok = self.token
        if self.token_file:
            tok = pathlib.Path(self.token_file).read_text().strip()
        hs = {"Accept": "application/json", "User-Agent": "rdp-test-client"}
        if tok:
            hs["Authorization"] = "Bearer " + tok
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            hs["Content-Type"] = content_type
        hs.update(headers or {})
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = self._connect()
            try:
                self.conn.request(method, path, body=data, headers=hs)
                r = self.conn.getresponse()
                raw = r.read()
                break
            except (self._hc.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.close()
                if attempt:
                    raise
        self.last_headers = dict(r.getheaders())
        try:
            return r.status, json.loads(raw) if raw else None
        except ValueError:
            return r.status, raw

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except OSError:
                pass
            self.conn = None


def selector(**fields):
    """fieldSelector=... as client-go renders fields.Set{...}.AsSelector(): sorted keys,
    k=v joined by ',', URL-encoded. selector(**{"spec.nodeName": "n"})."""
    s = ",".join("%s=%s" % (k, fields[k]) for k in sorted(fields))
    return "fieldSelector=" + urllib.parse.quote(s, safe="")
