#!/usr/bin/python3
"""A stand-in kubelet plugin for NVIDIA's GPU DRA driver (gpu.nvidia.com), so that a pod whose
claim holds a GPU beside an RDMA NIC (deploy/dra/examples/gpu-nic-aligned.yaml) can start on a
node without GPUs. It is not the thing under test: the test publishes the GPU's ResourceSlice
with kubectl; this registers with kubelet's plugin watcher as a DRAPlugin (v1) and prepares
every claim's gpu.nvidia.com results with no CDI device, unprepares with success. It registers
again whenever its registration socket is gone (kubelet does not remove it, but a test may).

    gpu_dra_plugin.py [--driver gpu.nvidia.com] [--root /var/lib/kubelet]
"""
import argparse
import json
import pathlib
import ssl
import sys
import time
import urllib.request
from concurrent import futures

import grpc

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "integration"))
import dra_kubelet  # noqa: E402  (dra_protos())
import kubelet as kl  # noqa: E402  (protos())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", default="gpu.nvidia.com")
    ap.add_argument("--root", default="/var/lib/kubelet")
    ap.add_argument("--kubeconfig-dir", help="the cluster's kubeconfig/ (admin.conf): claims are read "
                    "from the API server to answer with their results")
    a = ap.parse_args()
    dra = dra_kubelet.dra_protos()
    _dp, reg = kl.protos()
    plugin_dir = pathlib.Path(a.root) / "plugins" / a.driver
    plugin_dir.mkdir(parents=True, exist_ok=True)
    endpoint = plugin_dir / "dra.sock"
    reg_sock = pathlib.Path(a.root) / "plugins_registry" / (a.driver + "-reg.sock")

    def prepare(req, ctx):
        resp = dra.NodePrepareResourcesResponse()
        for c in req.claims:
            r = resp.claims[c.uid]
            for res in claim_results(a, c):
                if res["driver"] == a.driver:
                    r.devices.add(request_names=[res["request"]], pool_name=res["pool"],
                                  device_name=res["device"])
        print("gpu-dra-plugin: prepared %s" % [c.name for c in req.claims], flush=True)
        return resp

    def unprepare(req, ctx):
        resp = dra.NodeUnprepareResourcesResponse()
        for c in req.claims:
            resp.claims[c.uid].error = ""
        print("gpu-dra-plugin: unprepared %s" % [c.name for c in req.claims], flush=True)
        return resp

    def info(req, ctx):
        return reg.PluginInfo(type="DRAPlugin", name=a.driver, endpoint=str(endpoint),
                              supported_versions=["v1.DRAPlugin"])

    def status(req, ctx):
        print("gpu-dra-plugin: registration %s %s" % (req.plugin_registered, req.error), flush=True)
        return reg.RegistrationStatusResponse()

    u = grpc.unary_unary_rpc_method_handler
    dra_srv = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    dra_srv.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin", {
            "NodePrepareResources": u(prepare, dra.NodePrepareResourcesRequest.FromString,
                                      dra.NodePrepareResourcesResponse.SerializeToString),
            "NodeUnprepareResources": u(unprepare, dra.NodeUnprepareResourcesRequest.FromString,
                                        dra.NodeUnprepareResourcesResponse.SerializeToString)}),))
    if endpoint.exists():
        endpoint.unlink()
    dra_srv.add_insecure_port("unix:" + str(endpoint))
    dra_srv.start()
    reg_srv = None
    while True:
        if reg_srv is None or not reg_sock.exists():
            if reg_srv is not None:
                reg_srv.stop(0)
            if reg_sock.exists():
                reg_sock.unlink()
            reg_srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
            reg_srv.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
                "pluginregistration.Registration", {
                    "GetInfo": u(info, reg.InfoRequest.FromString, reg.PluginInfo.SerializeToString),
                    "NotifyRegistrationStatus": u(status, reg.RegistrationStatus.FromString,
                                                  reg.RegistrationStatusResponse.SerializeToString)}),))
            reg_srv.add_insecure_port("unix:" + str(reg_sock))
            reg_srv.start()
            print("gpu-dra-plugin: serving %s" % reg_sock, flush=True)
        time.sleep(0.5)


def claim_results(a, c):
    """The claim's allocation results, read with the admin kubeconfig's certificate."""
    kc = pathlib.Path(a.kubeconfig_dir) / "admin.conf"
    conf = {}
    for line in kc.read_text().splitlines():
        k, _, v = line.strip().partition(": ")
        conf[k.lstrip("- ")] = v
    ctx = ssl.create_default_context(cafile=conf["certificate-authority"])
    ctx.load_cert_chain(conf["client-certificate"], conf["client-key"])
    url = "%s/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s" % (conf["server"], c.namespace, c.name)
    with urllib.request.urlopen(url, context=ctx, timeout=10) as r:
        claim = json.load(r)
    return claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])


if __name__ == "__main__":
    main()
