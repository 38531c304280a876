"""A simulated fleet for the controller side of model releases: an ECS cluster whose container instances are
simulated instances (tests/harness/model_agent.py), each with the real model agent and real tritonserver tasks.

Stand-ins: a moto server for S3, EC2 and ECS (moto EC2 instances registered as the cluster's container instances, so
ListContainerInstances/DescribeContainerInstances answer with their ec2InstanceId), reached through the S3-shaped
proxy (tests/harness/s3_proxy.py: S3's single-PUT limit and per-connection cap, scaled down; `fleet.moto` is the
proxied handle, so the instances, the publisher and a playbook given `fleet.moto.endpoint` all go through it); the
agents' introspection and IMDSv2 endpoints are the harness's. Versions of model `m` answer OUTPUT0 = INPUT0 + <version>. Bucket, prefix,
application, cluster and model default to the names below; the local rehearsal (rehearse_models.py) passes its inventory's.

    fleet = SimulatedFleet(tmp_path, moto, size=2)
    fleet.publish(1)                       # version 1 of m in S3 (what model_publish writes)
    fleet.controller("promoted", models=[{"name": "m", "version": 1}])   # module model_release's own code
    fleet.serving()                        # the version each instance's first task serves
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import retrying_client
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import rollout as _model_release_rollout
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.publish import publish_version
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.release import release_key

from .model_agent import SimulatedInstance
from .model_versions import make_version
from .moto import REGION, MotoServer
from .s3_proxy import TEST_BYTES_PER_S, TEST_SINGLE_PUT_LIMIT, ProxiedMoto, S3Proxy

BUCKET = "models"
PREFIX = "models"
APP = "triton"
CLUSTER = "fleet"
MODEL = "m"


class SimulatedFleet:
    def __init__(
        self,
        workdir: Path,
        moto: MotoServer,
        size: int,
        poll_interval_s: int = 1,
        tasks_per_instance: int = 1,
        bucket: str = BUCKET,
        prefix: str = PREFIX,
        application: str = APP,
        cluster: str = CLUSTER,
        model: str = MODEL,
    ) -> None:
        """Creates the bucket and the cluster when they are missing (an existing cluster keeps its settings)."""
        self.proxy = S3Proxy(moto.endpoint, workdir, bytes_per_s=TEST_BYTES_PER_S, single_put_limit=TEST_SINGLE_PUT_LIMIT).start()
        self.moto = moto = ProxiedMoto(moto, self.proxy)
        self.bucket, self.prefix, self.application, self.cluster, self.model = bucket, prefix, application, cluster, model
        self.s3 = moto.client("s3")
        if bucket not in [b["Name"] for b in self.s3.list_buckets()["Buckets"]]:
            self.s3.create_bucket(Bucket=bucket)
        ec2 = moto.client("ec2")
        image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        launched = ec2.run_instances(ImageId=image, MinCount=size, MaxCount=size, InstanceType="g5.xlarge")["Instances"]
        self.instance_ids = sorted(i["InstanceId"] for i in launched)
        ecs = moto.client("ecs")
        if not [c for c in ecs.describe_clusters(clusters=[cluster])["clusters"] if c["status"] == "ACTIVE"]:
            ecs.create_cluster(clusterName=cluster)
        for instance_id in self.instance_ids:
            document = json.dumps({"instanceId": instance_id, "region": REGION})
            ecs.register_container_instance(cluster=cluster, instanceIdentityDocument=document)
        self.source = workdir / "source"
        self.instances: list[SimulatedInstance] = []
        try:
            for instance_id in self.instance_ids:
                instance = SimulatedInstance(
                    workdir / instance_id, moto, bucket, prefix, application, instance_id, cluster=cluster, poll_interval_s=poll_interval_s
                )
                self.instances.append(instance)
                for _task in range(tasks_per_instance):
                    instance.add_task()
                instance.start_agent()
        except BaseException:
            self.stop()
            raise

    # -- the model repository and the controller

    def version_source(self, version: int, broken: bool = False) -> dict[str, Any]:
        """A version directory of the model (broken: fails to load), as model_repository_publish lists it."""
        version_dir, config = make_version(self.source, self.model, version, broken=broken)
        return {"model": self.model, "version": version, "source": str(version_dir), "config": str(config)}

    def publish(self, version: int, broken: bool = False) -> None:
        entry = self.version_source(version, broken)
        publish_version(retrying_client(self.s3), self.bucket, self.prefix, self.model, version, entry["source"], entry["config"])

    def controller(self, state: str, check_mode: bool = False, **params: Any) -> dict[str, Any]:
        """One model_release run in-process (the module's own code), against the moto server."""
        full = {
            "state": state,
            "bucket": self.bucket,
            "prefix": self.prefix,
            "application": self.application,
            "models": None,
            "release_id": None,
            "cluster": self.cluster,
            "instances": [],
            "timeout_s": 120,
            "poll_interval_s": 0.1,
            "bake_s": 0,
            "inference_failures_before": None,
            **params,
        }
        s3, ecs = (retrying_client(self.moto.client(service)) for service in ("s3", "ecs"))
        return _model_release_rollout.run(s3, ecs, full, check_mode, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))

    # -- what the fleet does

    def serving(self) -> list[float]:
        """The version each instance's first Triton task serves."""
        return [instance.tritons[0].infer(self.model, [10.0])[0] - 10.0 for instance in self.instances]

    def record(self, name: str) -> dict[str, Any] | None:
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=release_key(self.prefix, self.application, name))["Body"].read()
        except self.s3.exceptions.NoSuchKey:
            return None
        return json.loads(body)

    def records(self) -> dict[str, Any]:
        return {name: self.record(name) for name in ("current", "previous", "canary")}

    def ledger_entries(self) -> list[bytes]:
        """The release ledger's objects (docs/runbook.md), in key order: time order."""
        listed = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=f"{self.prefix.strip('/')}/ledger/{self.application}/".lstrip("/"))
        return [self.s3.get_object(Bucket=self.bucket, Key=o["Key"])["Body"].read() for o in listed.get("Contents", [])]

    def agent_logs(self) -> str:
        return "\n".join(f"{i.instance_id}: {i.agent_log()[-1500:]}" for i in self.instances)

    def stop(self) -> None:
        for instance in self.instances:
            instance.stop()
        self.proxy.stop()
