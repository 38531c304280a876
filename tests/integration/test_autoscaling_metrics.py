"""The metrics sidecar's configuration (playbooks/vars/metrics_sidecar.yml, rendered by ansible-playbook as
deploy.yml renders it) against real Triton metrics text: the CPU tritonserver's own /metrics after inferences, and
tests/fixtures/triton_metrics_gpu.txt, a SAMPLE in Triton's format for a GPU server (this machine has no GPU).

The CloudWatch agent itself does not run here. `published()` applies Prometheus' and the agent's documented rules
to the text - the target's labels from the file_sd file the image's entrypoint writes (its own function, with the
task's service name as the task metadata endpoint gives it), the relabel_configs' replacements, then the embedded
metric format: a declaration applies when its source labels joined by ';' match label_matcher, a metric is selected
by a metric_selectors regex, and a dimension set is published for a sample only when the sample has every label of
that set - so what is checked is the configuration we ship, with the agent's rules stood in by this function.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.harness.ansible import REPO_ROOT, run_playbook
from tests.harness.triton import write_model

sys.path.insert(0, str(REPO_ROOT / "roles" / "triton_image" / "files"))  # the entrypoint, as the image runs it
sys.path.insert(0, str(REPO_ROOT / "plugins" / "module_utils"))
entrypoint = importlib.import_module("triton_entrypoint")

RENDER = REPO_ROOT / "tests" / "integration" / "playbooks" / "render_metrics_sidecar.yml"
GPU_SAMPLE = REPO_ROOT / "tests" / "fixtures" / "triton_metrics_gpu.txt"
SAMPLE_LINE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
MODEL_DIMENSIONS = (("App", "ClusterName"), ("App", "ClusterName", "model"))
GPU_METRICS = ("nv_gpu_utilization", "nv_gpu_memory_used_bytes", "nv_gpu_memory_total_bytes")


@pytest.fixture(scope="module")
def sidecar() -> dict:
    run = run_playbook(RENDER)
    assert run.rc == 0, run.stdout[-3000:]
    return run.result("Rendered")["ansible_facts"]["sidecar"]


def configs(sidecar: dict) -> tuple[dict, dict]:
    env = {e["name"]: e["value"] for e in sidecar["container"]["environment"]}
    return yaml.safe_load(env["PROMETHEUS_CONFIG_CONTENT"]), json.loads(env["CW_CONFIG_CONTENT"])


def samples(text: str) -> list[tuple[str, dict[str, str]]]:
    out = []
    for line in text.splitlines():
        match = SAMPLE_LINE.match(line)
        if match and not line.startswith("#"):
            out.append((match["name"], dict(LABEL.findall(match["labels"] or ""))))
    return out


def target_labels(sidecar: dict, target_file: Path) -> dict[str, str]:
    """The scrape target's labels: the file_sd file's (the entrypoint wrote it), the job, then relabel_configs."""
    prometheus, _agent = configs(sidecar)
    job = prometheus["scrape_configs"][0]
    (target,) = json.loads(target_file.read_text())
    labels = {"job": job["job_name"], **target["labels"]}
    for relabel in job["relabel_configs"]:
        assert set(relabel) == {"target_label", "replacement"}, relabel  # the one form this stand-in applies
        labels[relabel["target_label"]] = relabel["replacement"]
    return labels


def entrypoint_target(tmp_path: Path, task: dict) -> Path:
    """The target file the image's entrypoint writes for a task with this metadata."""
    target = tmp_path / "metrics" / "triton.json"
    entrypoint.write_metrics_target(str(target), "8002", entrypoint.metrics_labels(task))
    return target


def published(sidecar: dict, text: str, target_file: Path) -> set[tuple[str, tuple]]:
    """(metric, ((dimension, value), ...)) the agent would publish from this scrape, by its documented rules."""
    _prometheus, agent = configs(sidecar)
    static = target_labels(sidecar, target_file)
    emf = agent["logs"]["metrics_collected"]["prometheus"]["emf_processor"]
    out = set()
    for name, labels in samples(text):
        labels = {**static, **labels}
        for declaration in emf["metric_declaration"]:
            source = ";".join(labels.get(label, "") for label in declaration["source_labels"])
            if not re.search(declaration["label_matcher"], source):
                continue
            if not any(re.search(selector, name) for selector in declaration["metric_selectors"]):
                continue
            for dimensions in declaration["dimensions"]:
                if all(d in labels for d in dimensions):
                    out.add((name, tuple(sorted((d, labels[d]) for d in dimensions))))
    return out


def test_the_rendered_container_is_the_cloudwatch_agent_with_both_configs(sidecar, tmp_path: Path):
    prometheus, agent = configs(sidecar)
    # the target file on the task volume the Triton container writes and the sidecar mounts read-only
    assert prometheus["scrape_configs"][0]["file_sd_configs"][0]["files"] == ["/inferops/metrics/triton.json"]
    assert sidecar["container"]["mountPoints"] == [
        {"sourceVolume": "metrics-targets", "containerPath": "/inferops/metrics", "readOnly": True}
    ]
    target = entrypoint_target(tmp_path, {"ServiceName": "triton-blue"})
    assert json.loads(target.read_text())[0]["targets"] == ["localhost:8002"]
    assert target_labels(sidecar, target) == {
        "job": "triton",
        "ClusterName": "inference",
        "App": "triton",
        "Service": "triton-blue",
        "Color": "blue",
    }
    assert agent["logs"]["metrics_collected"]["prometheus"]["prometheus_config_path"] == "env:PROMETHEUS_CONFIG_CONTENT"
    assert agent["logs"]["metrics_collected"]["prometheus"]["emf_processor"]["metric_namespace"] == sidecar["namespace"] == "Triton"
    assert sidecar["dimensions"] == {"ClusterName": "inference", "App": "triton"}


def test_real_cpu_triton_metrics_are_published_per_model_and_per_colour(sidecar, tmp_path: Path, triton_server):
    """The CPU tritonserver after two inferences, scraped as a green task's: every per-model metric with and without
    the model dimension, and with the task's colour."""
    write_model(tmp_path / "repo", "simple")
    server = triton_server(tmp_path / "repo", models=("simple",))
    server.infer("simple", [1.0, 2.0])
    server.infer("simple", [3.0])
    with urllib.request.urlopen(server.metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    found = published(sidecar, text, entrypoint_target(tmp_path, {"ServiceName": "triton-green"}))
    model_metrics = [m for m in sidecar["metrics"] if m not in GPU_METRICS]
    for metric in model_metrics:
        assert (metric, (("App", "triton"), ("ClusterName", "inference"))) in found, metric
        assert (metric, (("App", "triton"), ("ClusterName", "inference"), ("model", "simple"))) in found, metric
        assert (metric, (("App", "triton"), ("ClusterName", "inference"), ("Color", "green"))) in found, metric
    # the CPU server exposes no GPU metrics (--allow-gpu-metrics=false), and nothing unlisted is published
    assert {name for name, _dims in found} == set(model_metrics)


def test_gpu_sample_publishes_gpu_utilisation_and_memory(sidecar, tmp_path: Path):
    found = published(sidecar, GPU_SAMPLE.read_text(), entrypoint_target(tmp_path, {"ServiceName": "triton-blue"}))
    cluster = (("App", "triton"), ("ClusterName", "inference"))
    for metric in GPU_METRICS:
        assert (metric, cluster) in found, metric
        assert (metric, (("App", "triton"), ("ClusterName", "inference"), ("Color", "blue"))) in found, metric
    for model in ("resnet50", "bert"):
        assert ("nv_inference_queue_duration_us", (*cluster, ("model", model))) in found
        assert ("nv_inference_compute_infer_duration_us", (*cluster, ("model", model))) in found
    # GPU metrics carry no model label, so they are never published with one; power and CPU metrics are not selected
    assert not any(name in GPU_METRICS and "model" in dict(dims) for name, dims in found)
    assert {name for name, _dims in found} == set(sidecar["metrics"])


def test_what_scaling_and_alarms_read_is_published(sidecar):
    """Every metric the autoscaling and alarm defaults name is one the sidecar publishes."""
    scaling = yaml.safe_load((REPO_ROOT / "roles" / "fleet_autoscaling" / "defaults" / "main.yml").read_text())
    alarms = yaml.safe_load((REPO_ROOT / "roles" / "fleet_alarms" / "defaults" / "main.yml").read_text())
    used = {
        scaling["fleet_autoscaling_target_tracking"]["metric"],
        scaling["fleet_autoscaling_step_scaling"]["metric"],
        alarms["fleet_alarms_triton_failure_metric"],
        *alarms["fleet_alarms_gpu_memory_metrics"],
    }
    assert used <= set(sidecar["metrics"]), used - set(sidecar["metrics"])


def test_a_task_of_no_colour_service_publishes_the_application_wide_figures_only(sidecar, tmp_path: Path):
    """A task the entrypoint could not name a colour for (no service, an old ECS agent): no Color dimension, nothing lost."""
    found = published(sidecar, GPU_SAMPLE.read_text(), entrypoint_target(tmp_path, {"Family": "triton"}))
    assert found and not any("Color" in dict(dims) for _name, dims in found)
    assert ("nv_gpu_utilization", (("App", "triton"), ("ClusterName", "inference"))) in found


def test_the_dashboard_shows_tritons_figures_of_both_colours_side_by_side(sidecar, tmp_path: Path):
    """Every Triton widget of role fleet_alarms' dashboard draws a line per colour, on the dimension set the sidecar
    publishes for a colour's task: [ClusterName, App, Color]."""
    run = run_playbook(REPO_ROOT / "tests" / "integration" / "playbooks" / "render_dashboard.yml")
    assert run.rc == 0, run.stdout[-3000:]
    body = run.result("Rendered")["ansible_facts"]["body"]
    found = published(sidecar, GPU_SAMPLE.read_text(), entrypoint_target(tmp_path, {"ServiceName": "triton-green"}))
    published_sets = {(name, tuple(sorted(k for k, _v in dims))) for name, dims in found}
    by_title = {w["properties"].get("title", ""): w for w in body["widgets"] if w["type"] == "metric"}
    triton = {t: w for t, w in by_title.items() if any(m[0] == "Triton" for m in w["properties"]["metrics"] if isinstance(m[0], str))}
    assert len(triton) == 4, sorted(triton)
    for title, widget in triton.items():
        lines = [m for m in widget["properties"]["metrics"] if isinstance(m[0], str) and m[0] == "Triton"]
        colours = set()
        for line in lines:
            dims = dict(zip(line[2:-1:2], line[3:-1:2], strict=False))
            assert dims.get("ClusterName") == "inference" and dims.get("App") == "triton", (title, line)
            colours.add(dims.get("Color"))
            assert (line[1], tuple(sorted(dims))) in published_sets, (title, line)  # a line the sidecar publishes
        assert {"blue", "green"} <= colours, (title, colours)  # GPU memory stays application-wide
