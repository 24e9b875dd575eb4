#!/usr/bin/env python3
# Every answer of lvmm's REST API checked against cloud-hypervisor's OpenAPI file (vendored next
# to this script): a real `lvmm --api-socket` walked through each VM state with Kata's body.
"""usage: validate_api.py --lvmm BIN --kernel FILE --dir DIR

Starts `BIN --api-socket DIR/api.sock` (the way Kata starts its hypervisor), then in every VM
state (none, Created, Running, Paused, Shutdown) calls every endpoint the OpenAPI file lists and
checks: the status is one the file documents for it or one docs/api.md documents, a 200 body
validates against the file's schema, a 204 has no body, an error body is cloud-hypervisor's
list of messages. Exits 0 when all hold, 1 listing each violation."""

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import time

import jsonschema
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))

# Statuses lvmm documents beyond the file's own lists (docs/api.md, "Conventions").
EXTRA_STATUS = {400, 404, 405, 409, 501}


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=30)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(self.unix_path)
        self.sock = s


def inline_refs(node, schemas, depth=0):
    """The schema with every #/components/schemas reference replaced by its target."""
    if depth > 32:
        raise ValueError("schema references nest too deep")
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            return inline_refs(schemas[ref.rsplit("/", 1)[1]], schemas, depth + 1)
        return {k: inline_refs(v, schemas, depth + 1) for k, v in node.items()}
    if isinstance(node, list):
        return [inline_refs(v, schemas, depth + 1) for v in node]
    return node


class Checker:
    def __init__(self, spec, sock):
        self.spec = spec
        self.schemas = spec["components"]["schemas"]
        self.sock = sock
        self.errors = []
        self.calls = 0

    def schema_of(self, endpoint, method, status):
        op = self.spec["paths"].get("/" + endpoint, {}).get(method.lower())
        if op is None:
            return None, None
        resp = op.get("responses", {}).get(status) or op.get("responses", {}).get(str(status))
        if resp is None:
            return op, None
        content = resp.get("content", {}).get("application/json")
        return op, (content or {}).get("schema")

    def call(self, method, endpoint, body=None, state=""):
        conn = UnixHTTPConnection(self.sock)
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": "application/json"} if data is not None else {}
        conn.request(method, "/api/v1/" + endpoint, body=data, headers=headers)
        r = conn.getresponse()
        raw = r.read()
        conn.close()
        self.calls += 1
        self.check(method, endpoint, r.status, raw, state)
        return r.status, (json.loads(raw) if raw else None)

    def fail(self, what):
        self.errors.append(what)
        print("FAIL " + what, file=sys.stderr)

    def check(self, method, endpoint, status, raw, state):
        where = "%s %s [%s] -> %d" % (method, endpoint, state or "no VM", status)
        op, schema = self.schema_of(endpoint, method, status)
        listed = op is not None and (status in op.get("responses", {}) or
                                     str(status) in op.get("responses", {}))
        known = ("/" + endpoint) in self.spec["paths"]
        if not known and status != 404:
            self.fail(where + ": an endpoint the file does not list answered other than 404")
        if known and op is None and status != 400:
            self.fail(where + ": a verb the file does not list answered other than 400")
        if not listed and status not in EXTRA_STATUS and status not in (200, 204):
            self.fail(where + ": status documented neither by the file nor by docs/api.md")
        if status == 204:
            if raw:
                self.fail(where + ": 204 with a body")
            return
        try:
            body = json.loads(raw) if raw else None
        except ValueError as e:
            self.fail(where + ": body is not JSON: %s" % e)
            return
        if status >= 400:
            if not (isinstance(body, list) and body and all(isinstance(m, str) for m in body)):
                self.fail(where + ": error body is not a list of messages: %r" % (body,))
            return
        if schema is None:
            if status == 200 and op is not None:
                self.fail(where + ": 200 where the file documents none")
            return
        try:
            jsonschema.Draft4Validator(inline_refs(schema, self.schemas)).validate(body)
        except jsonschema.ValidationError as e:
            self.fail("%s: schema: %s at %s" % (where, e.message, list(e.absolute_path)))


def kata_body(kernel, console):
    """What Kata's generated client sends for an initrd sandbox, serial to a file."""
    return {
        "cpus": {"boot_vcpus": 1, "max_vcpus": 2, "kvm_hyperv": False, "nested": True,
                 "topology": {"threads_per_core": 1, "cores_per_die": 2,
                              "dies_per_package": 1, "packages": 1}},
        "memory": {"size": 64 << 20, "hotplug_size": 2 << 30, "mergeable": False,
                   "hotplug_method": "Acpi", "shared": True, "hugepages": False,
                   "prefault": False, "thp": True},
        "payload": {"kernel": kernel, "cmdline": "bench.mode=spin"},
        "rng": {"src": "/dev/urandom", "iommu": False},
        "serial": {"mode": "File", "file": console},
        "console": {"mode": "Off", "iommu": False},
        "platform": {"num_pci_segments": 2},
        "iommu": False, "watchdog": False, "pvpanic": False, "landlock_enable": False,
    }


def sweep(c, state):
    """Every endpoint of the file that changes nothing here, with a body where it takes one."""
    for path, ops in sorted(c.spec["paths"].items()):
        ep = path.lstrip("/")
        if ep in ("vmm.shutdown", "vm.create", "vm.boot", "vm.pause", "vm.resume",
                  "vm.shutdown", "vm.reboot", "vm.delete", "vm.remove-device"):
            continue
        for method in ops:
            body = None
            if "requestBody" in ops[method]:
                body = {"desired_vcpus": 1} if ep == "vm.resize" else {}
            c.call(method.upper(), ep, body, state)
    # the wrong verb, an unknown endpoint, an action in the wrong state
    c.call("PUT", "vm.info", None, state)
    c.call("GET", "vm.nonsense", None, state)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lvmm", required=True)
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--dir", required=True)
    a = ap.parse_args()

    with open(os.path.join(HERE, "cloud-hypervisor.yaml")) as f:
        spec = yaml.safe_load(f)
    sock = os.path.join(a.dir, "api.sock")
    log = open(os.path.join(a.dir, "lvmm.log"), "w")
    proc = subprocess.Popen([a.lvmm, "-v", "--api-socket", sock], stdout=log, stderr=log)
    try:
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        c = Checker(spec, sock)
        st, ping = c.call("GET", "vmm.ping")
        assert st == 200 and "version" in ping, "vmm.ping: %d %r" % (st, ping)
        sweep(c, "")
        c.call("PUT", "vm.boot")  # 404 without a VM

        body = kata_body(a.kernel, os.path.join(a.dir, "console.log"))
        if c.call("PUT", "vm.create", body, "none")[0] != 204:
            c.fail("vm.create of Kata's body refused")
            return 1
        bad = dict(body, fs=[{"tag": "kataShared", "socket": "/v.sock", "num_queues": 1,
                              "queue_size": 1024}])
        st, err = c.call("PUT", "vm.create", bad, "Created")  # 409: one VM at most
        sweep(c, "Created")
        c.call("PUT", "vm.pause", None, "Created")  # 405

        assert c.call("PUT", "vm.boot", None, "Created")[0] == 204
        sweep(c, "Running")
        c.call("PUT", "vm.resize", {"desired_vcpus": 2}, "Running")  # 501
        c.call("PUT", "vm.resume", None, "Running")  # 405
        assert c.call("PUT", "vm.pause", None, "Running")[0] == 204
        sweep(c, "Paused")
        assert c.call("PUT", "vm.resume", None, "Paused")[0] == 204
        assert c.call("PUT", "vm.reboot", None, "Running")[0] == 204
        assert c.call("PUT", "vm.shutdown", None, "Running")[0] == 204
        sweep(c, "Shutdown")
        assert c.call("PUT", "vm.delete", None, "Shutdown")[0] == 204
        sweep(c, "")

        # a vhost-user network, a virtio-fs share on another PCI segment, one whose back end's
        # socket is absent: 400 naming the field
        seg = [dict(bad["fs"][0], pci_segment=1)]
        for key, val, want in (("net", [{"tap": "tap0", "vhost_user": True}],
                                "'net[0].vhost_user' is unsupported"),
                               ("fs", seg, "'fs[0].pci_segment' is unsupported"),
                               ("fs", bad["fs"], "fs socket")):
            st, err = c.call("PUT", "vm.create", dict(body, **{key: val}), "none")
            if st != 400 or want not in (err or [""])[0]:
                c.fail("vm.create with %s: %d %r" % (key, st, err))
        assert c.call("PUT", "vmm.shutdown")[0] == 204
        if proc.wait(timeout=20) != 0:
            c.fail("lvmm exited %d" % proc.returncode)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    print("validate_api: %d calls, %d violations" % (c.calls, len(c.errors)))
    return 1 if c.errors else 0


if __name__ == "__main__":
    sys.exit(main())
