"""Model agent and release records: pure logic (no server; S3 mocked at the client-function boundary)."""

from __future__ import annotations

import io
import json

import pytest
from botocore.exceptions import ClientError

from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import agent, agent_config, agent_instance
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.release import (
    ReleaseError,
    build_release,
    parse_release,
    parse_status,
    release_key,
    release_models,
    render_release,
    status_key,
    target_release,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.release import view_releases as release_view_releases

APP = "triton"
CREATED = "2026-01-01T00:00:00Z"


def record(**changes) -> dict:
    base = {"schema": 1, "application": APP, "release_id": "r-1", "created": CREATED, "models": [{"name": "resnet50", "version": 4}]}
    return {**base, **changes}


def raw(value) -> bytes:
    return json.dumps(value).encode()


# ---------------------------------------------------------------- release records


def test_keys_follow_the_contract():
    assert release_key("models/", APP, "current") == "models/releases/triton/current.json"
    assert release_key("", APP, "canary") == "releases/triton/canary.json"
    assert status_key("models", APP, "i-0abc123") == "models/status/triton/i-0abc123.json"
    with pytest.raises(ReleaseError, match="'latest' is not one of current, previous, canary"):
        release_key("models", APP, "latest")
    with pytest.raises(ReleaseError, match="not an EC2 instance id"):
        status_key("models", APP, "../other")


def test_a_valid_record_round_trips_and_renders_canonically():
    built = build_release(APP, "r-1", [{"name": "resnet50", "version": 4}], CREATED)
    assert parse_release(render_release(built), APP, "current.json") == built
    assert render_release(built) == render_release(json.loads(render_release(built)))
    assert release_models(built) == {"resnet50": 4}
    assert release_models(None) == {}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"schema": 3}, r"schema=3, expected 2"),
        ({"schema": True}, r"schema=True, expected 2"),
        ({"application": "other"}, r"application='other', expected 'triton'"),
        ({"release_id": "r 1"}, r"release_id='r 1' must be 1-128 characters"),
        ({"release_id": "x" * 129}, r"must be 1-128 characters"),
        ({"created": ""}, r"created=''; expected an ISO-8601"),
        ({"models": {"resnet50": 4}}, r"expected a list of \{name, version\}"),
        ({"models": [{"name": "../etc", "version": 1}]}, r"not a usable model directory name"),
        ({"models": [{"name": "m", "version": "4"}]}, r"must be a JSON integer"),
        ({"models": [{"name": "m", "version": True}]}, r"must be a JSON integer"),
        ({"models": [{"name": "m", "version": 0}]}, r"not a positive integer"),
        ({"models": [{"name": "m", "version": 1, "extra": 1}]}, r"name, version and \(optionally\) sha256"),
        ({"models": [{"name": "m", "version": 1, "sha256": "ABC"}]}, r"sha256 must be 64 lowercase hex digits"),
        ({"task_definition": "triton"}, r"task_definition='triton' is not a task definition revision"),
        ({"task_definition": "arn:aws:ecs:eu-west-1:1:task-definition/t:1"}, r"is not a task definition revision"),
        ({"image": ""}, r"image=''; expected a string or null"),
        ({"models": [{"name": "m", "version": 1}, {"name": "m", "version": 2}]}, r"model m is listed twice"),
        ({"instances": []}, r"lists at least one instance id"),
        ({"instances": ["host-1"]}, r"'host-1' is not an EC2 instance id"),
    ],
)
def test_a_bad_record_names_the_field_and_the_fix(changes, message):
    with pytest.raises(ReleaseError, match=message):
        parse_release(raw(record(**changes)), APP, "s3://b/current.json")


def test_a_record_that_is_not_json_or_not_an_object_is_refused():
    with pytest.raises(ReleaseError, match=r"s3://b/current.json is not JSON"):
        parse_release(b"{", APP, "s3://b/current.json")
    with pytest.raises(ReleaseError, match="must be a JSON object, got list"):
        parse_release(b"[]", APP, "s3://b/current.json")


def test_an_empty_model_list_is_a_valid_release():
    assert release_models(parse_release(raw(record(models=[])), APP, "x")) == {}


def test_the_canary_is_the_target_only_of_the_instances_it_lists():
    current = record(release_id="r-1")
    canary = record(release_id="r-2", instances=["i-0aaa"])
    assert target_release(current, canary, "i-0aaa")["release_id"] == "r-2"
    assert target_release(current, canary, "i-0bbb")["release_id"] == "r-1"
    assert target_release(current, None, "i-0aaa")["release_id"] == "r-1"
    assert target_release(None, canary, "i-0bbb") is None


def test_a_status_object_is_checked_when_read_back():
    status = {"schema": 1, "application": APP, "instance_id": "i-0aaa", "state": "applied"}
    assert parse_status(raw(status), APP, "s")["state"] == "applied"
    with pytest.raises(ReleaseError, match="state='done'"):
        parse_status(raw({**status, "state": "done"}), APP, "s")


# ---------------------------------------------------------------- configuration


def config_bytes(**values) -> bytes:
    return raw({"bucket": "models-bucket", "application": APP, "region": "eu-west-1", **values})


def test_config_defaults_serve_a_real_fleet():
    config = agent_config.parse_config(config_bytes(), "/etc/inferops/model-agent.json")
    assert config["introspection_url"] == "http://127.0.0.1:51678"
    assert config["imds_url"] == "http://169.254.169.254"
    assert config["endpoint_url"] is None
    assert config["host_path"] == "/mnt/models"
    assert config["smoke_inference"] is True


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"bucket": ""}, r"bucket=''; set it"),
        ({"poll_interval_s": 0}, r"poll_interval_s=0; expected an integer from 1 to 3600"),
        ({"keep_versions": True}, r"keep_versions=True"),
        ({"boot_retry_delay_s": -1}, r"boot_retry_delay_s=-1"),
        ({"host_path": "models"}, r"host_path='models'; expected an absolute path"),
        ({"poll_interval": 5}, r"unknown keys \['poll_interval'\]"),
        ({"smoke_inference": "no"}, r"smoke_inference='no'; expected true or false"),
    ],
)
def test_a_bad_config_names_the_key(values, message):
    with pytest.raises(agent_config.ConfigError, match=message):
        agent_config.parse_config(config_bytes(**values), "model-agent.json")


# ---------------------------------------------------------------- task discovery


def task(arn: str, container: dict, known: str = "RUNNING") -> dict:
    return {"Arn": arn, "DesiredStatus": "RUNNING", "KnownStatus": known, "Family": "triton", "Version": "3", "Containers": [container]}


def test_awsvpc_tasks_are_reached_at_their_eni_address_on_the_container_ports():
    listing = {
        "Tasks": [
            task(
                "arn:task/a",
                {"Name": "triton", "Networks": [{"NetworkMode": "awsvpc", "IPv4Addresses": ["10.0.1.23"]}], "Ports": []},
            )
        ]
    }
    assert agent_instance.triton_tasks(listing, "triton", 8000, 8002) == [
        {"arn": "arn:task/a", "url": "http://10.0.1.23:8000", "metrics_url": "http://10.0.1.23:8002/metrics", "view": "triton-3"}
    ]


def test_bridge_and_host_tasks_are_reached_on_the_instance_at_their_host_ports():
    bridge = {"Name": "triton", "Ports": [{"ContainerPort": 8000, "HostPort": 32768}, {"ContainerPort": 8002, "HostPort": 32770}]}
    host = {"Name": "triton", "Ports": [{"ContainerPort": 8000, "HostPort": 8000}], "Networks": [{"NetworkMode": "host"}]}
    listing = {"Tasks": [task("arn:task/b", bridge), task("arn:task/h", host)]}
    assert agent_instance.triton_tasks(listing, "triton", 8000, 8002) == [
        {"arn": "arn:task/b", "url": "http://127.0.0.1:32768", "metrics_url": "http://127.0.0.1:32770/metrics", "view": "triton-3"},
        {"arn": "arn:task/h", "url": "http://127.0.0.1:8000", "metrics_url": None, "view": "triton-3"},
    ]


def test_tasks_not_running_other_containers_and_unpublished_ports_are_skipped():
    published = [{"ContainerPort": 8000, "HostPort": 8000}]
    listing = {
        "Tasks": [
            task("arn:task/stopping", {"Name": "triton", "Ports": published}, known="STOPPED"),
            task("arn:task/sidecar", {"Name": "log-router", "Ports": published}),
            task("arn:task/noport", {"Name": "triton", "Ports": [{"ContainerPort": 8001, "HostPort": 8001}]}),
        ]
    }
    assert agent_instance.triton_tasks(listing, "triton", 8000, 8002) == []
    assert agent_instance.triton_tasks({"Tasks": None}, "triton", 8000, 8002) == []


def test_views_in_use_are_those_of_triton_tasks_not_stopped():
    triton = {"Name": "triton", "Ports": []}
    listing = {
        "Tasks": [
            task("arn:task/starting", triton, known="PULLED"),
            dict(task("arn:task/stopping", triton), Version="2", DesiredStatus="STOPPED"),
            dict(task("arn:task/daemon", {"Name": "cloudwatch-agent"}), Family="agent"),
            dict(task("arn:task/odd", triton), Version=None),
        ]
    }
    assert agent_instance.views_in_use(listing, "triton") == {"triton-3"}


def test_inference_failures_are_summed_per_model_over_versions():
    text = "\n".join(
        [
            "# HELP nv_inference_request_failure Number of failed inference requests",
            'nv_inference_request_failure{model="resnet50",version="3"} 2',
            'nv_inference_request_failure{model="resnet50",version="4"} 1',
            'nv_inference_request_failure{reason="BACKEND",model="bert",version="1"} 0',
            'nv_inference_request_success{model="resnet50",version="4"} 90',
        ]
    )
    assert agent_instance.failures_by_model(text) == {"resnet50": 3, "bert": 0}


# ---------------------------------------------------------------- status


CONFIG = {"application": APP}
IDENTITY = {"instance_id": "i-0aaa", "container_instance_arn": "arn:ci", "cluster": "fleet"}
TASKS = [
    {"arn": "t1", "url": "http://10.0.0.1:8000", "view": "triton-3", "ready": True},
    {"arn": "t2", "url": "http://10.0.0.2:8000", "view": "triton-3", "ready": True},
]


def status(state: str, loaded: dict, tasks=None, synced=None, errors=None) -> dict:
    tasks = TASKS if tasks is None else tasks
    synced = {"resnet50": [3, 4]} if synced is None else synced
    target = record()
    views = {"triton-3": target}
    return agent_instance.build_status(CONFIG, IDENTITY, target, state, views, synced, loaded, tasks, {}, errors or {}, None, CREATED)


def test_applied_means_synced_and_serving_on_every_task():
    done = status("applying", {"t1": {"resnet50": [4]}, "t2": {"resnet50": [4]}})
    assert (done["state"], done["applied"], done["release_id"]) == ("applied", True, "r-1")
    assert done["models"] == {"resnet50": {"wanted": 4, "synced": [3, 4], "loaded": {"t1": [4], "t2": [4]}}}
    assert done["releases"]["r-1"]["views"] == ["triton-3"] and done["releases"]["r-1"]["applied"] is True
    assert done["instance_id"] == "i-0aaa" and done["container_instance_arn"] == "arn:ci"


@pytest.mark.parametrize(
    ("state", "loaded", "tasks", "synced"),
    [
        ("applying", {"t1": {"resnet50": [4]}, "t2": {"resnet50": [3]}}, TASKS, None),  # one task still on the previous version
        ("applying", {"t1": {"resnet50": [3, 4]}, "t2": {"resnet50": [4]}}, TASKS, None),  # one task serves two versions
        ("applying", {"t1": {"resnet50": [4]}}, [TASKS[0], {**TASKS[1], "ready": False}], None),  # a task unreachable
        ("applying", {"t1": {"resnet50": [4]}, "t2": {"resnet50": [4]}}, TASKS, {"resnet50": [3]}),  # not on disk
        ("hydrating", {}, [], None),  # boot hydration loads nothing
        ("failed", {"t1": {"resnet50": [4]}, "t2": {"resnet50": [4]}}, TASKS, None),
    ],
)
def test_not_applied_until_every_task_serves_the_release(state, loaded, tasks, synced):
    built = status(state, loaded, tasks, synced)
    assert built["applied"] is False
    assert built["state"] == state


def test_each_release_is_judged_on_its_own_tasks_only():
    """The live colour's tasks serve its release; the standby's release is applied on its own (here: no task yet)."""
    live = record(release_id="r-live", task_definition="triton:3", models=[{"name": "resnet50", "version": 3}])
    standby = record(release_id="r-new", task_definition="triton:4", models=[{"name": "resnet50", "version": 4}])
    views = {"triton-3": live, "triton-4": standby}
    loaded = {"t1": {"resnet50": [3]}, "t2": {"resnet50": [3]}}
    built = agent_instance.build_status(
        CONFIG, IDENTITY, live, "applying", views, {"resnet50": [3, 4]}, loaded, TASKS, {}, {}, None, CREATED
    )
    assert built["releases"]["r-live"]["applied"] is True
    assert built["releases"]["r-new"] == {
        "task_definition": "triton:4",
        "views": ["triton-4"],
        "tasks": [],
        "models": {"resnet50": {"wanted": 4, "loaded": {}}},
        "errors": [],
        "applied": True,
    }
    failed = agent_instance.build_status(
        CONFIG, IDENTITY, live, "applying", views, {"resnet50": [3]}, loaded, TASKS, {}, {"r-new": ["boom"]}, None, CREATED
    )
    assert failed["releases"]["r-new"]["applied"] is False and failed["applied"] is True


# ---------------------------------------------------------------- which release each task definition serves


def test_each_task_definition_is_bound_to_its_own_release():
    records = {
        "current": record(release_id="r-3", task_definition="arn:aws:ecs:eu-west-1:111111111111:task-definition/triton:3"),
        "standby": record(release_id="r-4", task_definition="triton:4"),
        "previous": record(release_id="r-2", task_definition="triton:2"),
        "canary": None,
    }
    views = release_view_releases(records, "i-0aaa", {"triton-3", "triton-9"})
    assert {name: r["release_id"] for name, r in views.items()} == {"triton-3": "r-3", "triton-4": "r-4", "triton-2": "r-2"}


def test_a_canary_binds_its_task_definition_only_on_the_instances_it_lists():
    current = record(release_id="r-3", task_definition="triton:3")
    canary = record(release_id="r-3b", task_definition="triton:3", instances=["i-0aaa"])
    records = {"current": current, "canary": canary, "standby": None, "previous": None}
    assert release_view_releases(records, "i-0aaa", set())["triton-3"]["release_id"] == "r-3b"
    assert release_view_releases(records, "i-0bbb", set())["triton-3"]["release_id"] == "r-3"


def test_a_release_without_task_definition_serves_every_task_no_other_release_binds():
    records = {"current": record(release_id="r-1"), "standby": record(release_id="r-2", task_definition="triton:7")}
    views = release_view_releases(records, "i-0aaa", {"triton-3", "triton-7"})
    assert {name: r["release_id"] for name, r in views.items()} == {"triton-7": "r-2", "triton-3": "r-1"}
    # once production's release names its task definition, an unknown revision's tasks are left as they are
    records["current"] = record(release_id="r-1", task_definition="triton:6")
    assert "triton-3" not in release_view_releases(records, "i-0aaa", {"triton-3"})


# ---------------------------------------------------------------- conditional reads


class FakeS3:
    """Answers head_object/get_object from a dict, counting the reads."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects
        self.gets: list[str] = []

    def head_object(self, Bucket, Key, **_):
        if Key not in self.objects:
            raise ClientError({"Error": {"Code": "404"}}, "HeadObject")
        return {"ETag": f'"{hash(self.objects[Key])}"'}

    def get_object(self, Bucket, Key, **_):
        self.gets.append(Key)
        return {"Body": io.BytesIO(self.objects[Key])}


def test_records_are_read_again_only_when_their_etag_changes():
    current_key = release_key("models", APP, "current")
    s3 = FakeS3({current_key: raw(record(release_id="r-1"))})
    config = agent_config.parse_config(config_bytes(prefix="models"), "c")
    model_agent = agent.ModelAgent(config, agent.BotocoreRetryingClient(s3), dict(IDENTITY))
    assert model_agent.target()["release_id"] == "r-1"
    assert model_agent.target()["release_id"] == "r-1"
    assert s3.gets == [current_key]  # the second poll: HEADs only
    s3.objects[current_key] = raw(record(release_id="r-2"))
    assert model_agent.target()["release_id"] == "r-2"
    assert s3.gets == [current_key, current_key]


def test_the_standalone_client_accepts_aws_retry_like_the_module_clients():
    s3 = FakeS3({"k": b"v"})
    assert agent.BotocoreRetryingClient(s3).get_object(aws_retry=True, Bucket="b", Key="k")["Body"].read() == b"v"
