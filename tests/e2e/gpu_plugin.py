#!/usr/bin/python3
"""A stand-in device plugin for nvidia.com/gpu, so that the seeds' pods (which ask for one GPU
beside rdma/hca_shared_devices_a) can be scheduled on a node without GPUs. It is not the thing
under test: it advertises N healthy devices gpu0..gpuN-1 and answers Allocate with
NVIDIA_VISIBLE_DEVICES naming them, nothing else. It registers with kubelet.sock and registers
again whenever kubelet re-creates that socket (a kubelet restart removes every socket in the
directory, this one's included).

    gpu_plugin.py [--count N] [--dir /var/lib/kubelet/device-plugins]
"""
import argparse
import os
import pathlib
import sys
import threading
import time
from concurrent import futures

import grpc

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "integration"))
import kubelet as kl  # noqa: E402  (protos(), stub())

RESOURCE = "nvidia.com/gpu"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--dir", default="/var/lib/kubelet/device-plugins")
    a = ap.parse_args()
    dp, _reg = kl.protos()
    d = pathlib.Path(a.dir)
    sock = d / "rdp-e2e-gpu.sock"
    stop = threading.Event()

    def options(req, ctx):
        return dp.DevicePluginOptions()

    def list_and_watch(req, ctx):
        yield dp.ListAndWatchResponse(devices=[
            dp.Device(ID="gpu%d" % i, health="Healthy") for i in range(a.count)])
        while ctx.is_active() and not stop.wait(1):
            pass

    def allocate(req, ctx):
        resp = dp.AllocateResponse()
        for c in req.container_requests:
            car = resp.container_responses.add()
            car.envs["NVIDIA_VISIBLE_DEVICES"] = ",".join(c.devices_ids)
        return resp

    def prestart(req, ctx):
        return dp.PreStartContainerResponse()

    def preferred(req, ctx):
        return dp.PreferredAllocationResponse()

    handlers = {
        "GetDevicePluginOptions": grpc.unary_unary_rpc_method_handler(
            options, dp.Empty.FromString, dp.DevicePluginOptions.SerializeToString),
        "ListAndWatch": grpc.unary_stream_rpc_method_handler(
            list_and_watch, dp.Empty.FromString, dp.ListAndWatchResponse.SerializeToString),
        "Allocate": grpc.unary_unary_rpc_method_handler(
            allocate, dp.AllocateRequest.FromString, dp.AllocateResponse.SerializeToString),
        "PreStartContainer": grpc.unary_unary_rpc_method_handler(
            prestart, dp.PreStartContainerRequest.FromString,
            dp.PreStartContainerResponse.SerializeToString),
        "GetPreferredAllocation": grpc.unary_unary_rpc_method_handler(
            preferred, dp.PreferredAllocationRequest.FromString,
            dp.PreferredAllocationResponse.SerializeToString),
    }
    server = None
    kubelet_ino = None
    while True:
        try:
            ino = os.stat(d / "kubelet.sock").st_ino
        except OSError:
            ino = None
        if ino is not None and (ino != kubelet_ino or not sock.exists()):
            if server is not None:
                server.stop(0)
            if sock.exists():
                sock.unlink()
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
            server.add_generic_rpc_handlers(
                (grpc.method_handlers_generic_handler("v1beta1.DevicePlugin", handlers),))
            server.add_insecure_port("unix:" + str(sock))
            server.start()
            try:
                ch = grpc.insecure_channel("unix:" + str(d / "kubelet.sock"))
                register = kl.stub(ch, "/v1beta1.Registration/Register", dp.RegisterRequest, dp.Empty)
                register(dp.RegisterRequest(version="v1beta1", endpoint=sock.name,
                                            resource_name=RESOURCE), timeout=10)
                ch.close()
                kubelet_ino = ino
                print("gpu-plugin: registered %s x%d" % (RESOURCE, a.count), flush=True)
            except grpc.RpcError as e:
                print("gpu-plugin: register failed: %s" % e, flush=True)
        time.sleep(0.5)


if __name__ == "__main__":
    main()
