"""The account inventories/example documents, made in a moto server, and a copy of the example filled for it.

`create_account()` makes every resource the example says is "created elsewhere", shaped as its comments describe
(tests/fixtures/example_account.yml): a VPC with one private subnet per zone, three separate security groups (only
the ALB's with ingress: clients on 443, the controller's network on the test listener's 8443), a shared internal ALB
whose HTTPS listener on 443 answers 404 by default (each application adds its host-header rule), an ACM certificate
(self-signed for the service host, imported), the SNS topic, the model bucket, the ECR repository, and an AMI with
the manifest `packer build packer/` would write. `fill_example()` copies inventories/example and replaces its
placeholders, and nothing else, with those ids; `edits_beyond_placeholders()` counts the lines that differ otherwise.
`profile_env()` is how a team points the example's `aws_profile` at an endpoint: an AWS config file whose profile
carries `endpoint_url` and a credentials file with its keys (moto's placeholder keys).

Where moto cannot stand in: no routing (the private subnets' NAT or VPC endpoints are not modelled), no IAM
evaluation, no AWS managed policies (the instance role's AmazonEC2ContainerServiceforEC2Role exists only as a name
moto loads only with MOTO_IAM_LOAD_MANAGED_POLICIES: `MOTO_ENV`), no DNS (the service host is `localhost`, whose test route
tests/harness/alb.py serves with the imported certificate on the test listener's port).
"""

from __future__ import annotations

import datetime
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .ansible import REPO_ROOT
from .moto import ACCOUNT_ID, MotoServer

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "example_account.yml"
EXAMPLE = REPO_ROOT / "inventories" / "example"
# The example's profile (group_vars/all/aws.yml): not a placeholder, so the rehearsal gives it an endpoint.
EXAMPLE_PROFILE = "triton-deploy"
# The instance role attaches AWS's AmazonEC2ContainerServiceforEC2Role: moto holds AWS's managed policies only when
# told to load them (it evaluates none).
MOTO_ENV = {"MOTO_IAM_LOAD_MANAGED_POLICIES": "true"}


@dataclass
class Account:
    """What create_account() made: ids by the example's placeholder, and the files the rehearsal needs."""

    region: str
    service_host: str
    substitutions: dict[str, str]
    ids: dict[str, Any] = field(default_factory=dict)
    certificate_path: Path | None = None
    key_path: Path | None = None


def fixture() -> dict[str, Any]:
    return yaml.safe_load(FIXTURE.read_text())


def self_signed_certificate(host: str, workdir: Path) -> tuple[Path, Path]:
    """A self-signed certificate for `host` (its own CA) and its key, as PEM files in `workdir`."""
    return _self_signed(host, workdir)


def _self_signed(host: str, workdir: Path) -> tuple[Path, Path]:
    """A certificate and key for `host` (the listener's certificate, imported into ACM; the controller trusts it)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = workdir / "service-host.crt", workdir / "service-host.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption())
    )
    return cert_path, key_path


def create_account(moto: MotoServer, workdir: Path, spec: dict[str, Any] | None = None) -> Account:
    """Every "created elsewhere" resource of inventories/example in the moto server; returns the substitutions."""
    spec = spec or fixture()
    region = spec["region"]

    def client(service: str):
        import boto3

        return boto3.client(
            service, region_name=region, endpoint_url=moto.endpoint, aws_access_key_id="testing", aws_secret_access_key="testing"
        )

    ec2 = client("ec2")
    vpc = ec2.create_vpc(CidrBlock=spec["vpc_cidr"])["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=s["cidr"], AvailabilityZone=s["zone"])["Subnet"]["SubnetId"] for s in spec["private_subnets"]
    ]
    groups = {}
    for part, group in spec["security_groups"].items():
        groups[part] = ec2.create_security_group(GroupName=f"triton-{part}", Description=group["description"], VpcId=vpc)["GroupId"]
        permissions = [
            {"IpProtocol": "tcp", "FromPort": rule["port"], "ToPort": rule["port"], "IpRanges": [{"CidrIp": spec[rule["cidr"]]}]}
            for rule in group["ingress"]
        ]
        if permissions:
            ec2.authorize_security_group_ingress(GroupId=groups[part], IpPermissions=permissions)

    cert_path, key_path = _self_signed(spec["service_host"], workdir)
    certificate = client("acm").import_certificate(Certificate=cert_path.read_bytes(), PrivateKey=key_path.read_bytes())["CertificateArn"]

    elbv2 = client("elbv2")
    lb = spec["load_balancer"]
    alb = elbv2.create_load_balancer(
        Name=lb["name"], Subnets=subnets, SecurityGroups=[groups["alb"]], Scheme="internal", Type="application"
    )["LoadBalancers"][0]["LoadBalancerArn"]
    listener = elbv2.create_listener(
        LoadBalancerArn=alb,
        Port=lb["listener_port"],
        Protocol="HTTPS",
        Certificates=[{"CertificateArn": certificate}],
        DefaultActions=[{"Type": "fixed-response", "FixedResponseConfig": {"StatusCode": "404", "ContentType": "text/plain"}}],
    )["Listeners"][0]["ListenerArn"]

    topic = client("sns").create_topic(Name=spec["topic"])["TopicArn"]
    s3 = client("s3")
    s3.create_bucket(Bucket=spec["model_bucket"], CreateBucketConfiguration={"LocationConstraint": region})
    repository = client("ecr").create_repository(repositoryName=spec["ecr_repository"])["repository"]["repositoryArn"]
    ami = _register_ami(ec2, spec["ami"]["name"])
    account = Account(
        region=region,
        service_host=spec["service_host"],
        substitutions={},
        ids={
            "vpc": vpc,
            "subnets": subnets,
            "security_groups": groups,
            "alb": alb,
            "listener": listener,
            "certificate": certificate,
            "topic": topic,
            "bucket": spec["model_bucket"],
            "repository": repository,
            "ami": ami,
            "model_host_path": spec["ami"]["model_host_path"],
        },
        certificate_path=cert_path,
        key_path=key_path,
    )
    account.substitutions = substitutions(account)
    return account


def _register_ami(ec2: Any, name: str) -> str:
    """An AMI of the account (what `packer build` registers), from one of moto's public images."""
    source = ec2.describe_images(Owners=["amazon"], Filters=[{"Name": "architecture", "Values": ["x86_64"]}])["Images"][0]["ImageId"]
    instance = ec2.run_instances(ImageId=source, MinCount=1, MaxCount=1, InstanceType="t3.micro")["Instances"][0]["InstanceId"]
    ami = ec2.create_image(InstanceId=instance, Name=name)["ImageId"]
    ec2.terminate_instances(InstanceIds=[instance])
    return ami


def substitutions(account: Account) -> dict[str, str]:
    """Each placeholder of inventories/example -> its value in this account, longest first (an ARN before its account)."""
    ids = account.ids
    groups = ids["security_groups"]
    digest = "sha256:" + "ab" * 32  # a pinned digest; the rehearsal builds no image and pulls no sidecar
    found = {
        "arn:aws:elasticloadbalancing:eu-west-1:111111111111:loadbalancer/app/shared-internal/0123456789abcdef": ids["alb"],
        "arn:aws:acm:eu-west-1:111111111111:certificate/00000000-0000-0000-0000-000000000000": ids["certificate"],
        "triton.internal.example.com": account.service_host,
        "example-triton-models": ids["bucket"],
        "vpc-0123456789abcdef0": ids["vpc"],
        "subnet-0123456789abcdef0": ids["subnets"][0],
        "subnet-0123456789abcdef1": ids["subnets"][1],
        "sg-0123456789abcdef0": groups["tasks"],
        "sg-0123456789abcdef1": groups["instances"],
        "sg-0123456789abcdef2": groups["alb"],
        "REPLACE_VERSION@sha256:REPLACE_DIGEST": "1.300000.0@" + digest,
        "sha256:REPLACE_WITH_THE_NGC_DIGEST": digest,
        "111111111111": ACCOUNT_ID,
    }
    return dict(sorted(found.items(), key=lambda item: -len(item[0])))


def fill_example(destination: Path, account: Account) -> Path:
    """A copy of inventories/example at `destination` with every placeholder replaced, nothing else changed."""
    if destination.exists():
        shutil.rmtree(destination)
    shutil.copytree(EXAMPLE, destination)
    for path in sorted(destination.rglob("*.yml")):
        text = path.read_text()
        for placeholder, value in account.substitutions.items():
            text = text.replace(placeholder, value)
        path.write_text(text)
    return destination


def edits_beyond_placeholders(filled: Path, account: Account) -> list[str]:
    """Lines of the filled copy that differ from inventories/example other than by a placeholder's substitution
    (and files added or removed)."""
    found = []
    originals = {p.relative_to(EXAMPLE) for p in EXAMPLE.rglob("*") if p.is_file()}
    copies = {p.relative_to(filled) for p in filled.rglob("*") if p.is_file()}
    found += [f"{name}: added" for name in sorted(copies - originals)] + [f"{name}: removed" for name in sorted(originals - copies)]
    for name in sorted(originals & copies):
        before, after = (EXAMPLE / name).read_text().splitlines(), (filled / name).read_text().splitlines()
        if len(before) != len(after):
            found.append(f"{name}: {len(before)} lines became {len(after)}")
            continue
        for number, (old, new) in enumerate(zip(before, after, strict=True), start=1):
            expected = old
            for placeholder, value in account.substitutions.items():
                expected = expected.replace(placeholder, value)
            if new != expected:
                found.append(f"{name}:{number}: {new!r}")
    return found


def write_packer_manifest(path: Path, account: Account) -> Path:
    """packer/manifest.json as Packer's manifest post-processor writes it (packer/gpu_ami.pkr.hcl: strip_path, custom_data)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    build = {
        "name": "gpu_ami",
        "builder_type": "amazon-ebs",
        "build_time": 1764547200,
        "files": None,
        "artifact_id": f"{account.region}:{account.ids['ami']}",
        "packer_run_uuid": "00000000-1111-2222-3333-444444444444",
        "custom_data": {"model_host_path": account.ids["model_host_path"]},
    }
    path.write_text(json.dumps({"builds": [build], "last_run_uuid": build["packer_run_uuid"]}, indent=2))
    return path


def profile_env(workdir: Path, moto: MotoServer, account: Account) -> dict[str, str]:
    """The environment a team's controller has: the example's profile in an AWS config file (its region and, here, the
    endpoint), its keys in a credentials file, and the listener certificate among the trusted ones."""
    config, credentials = workdir / "aws-config", workdir / "aws-credentials"
    config.write_text(f"[profile {EXAMPLE_PROFILE}]\nregion = {account.region}\nendpoint_url = {moto.endpoint}\n")
    # moto's placeholder keys: moto accepts any; these are not real credentials.
    credentials.write_text(f"[{EXAMPLE_PROFILE}]\naws_access_key_id = testing\naws_secret_access_key = testing\n")
    return {
        "AWS_CONFIG_FILE": str(config),
        "AWS_SHARED_CREDENTIALS_FILE": str(credentials),
        "SSL_CERT_FILE": str(account.certificate_path),
    }
