"""The metadata field's limits, without HTTP (the API's answers are in tests/api)."""

from __future__ import annotations

import json
import uuid

import pytest

from pagemill.db.models import Job
from pagemill.domain import LicenseUse, SourceKind
from pagemill.jobs.metadata import MAX_METADATA_DEPTH, MetadataRejected, parse_metadata
from pagemill.jobs.summaries import build_manifest, manifest_json


def nested(depth: int) -> dict[str, object]:
    value: dict[str, object] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_nesting_up_to_the_limit_is_kept_and_past_it_refused() -> None:
    assert parse_metadata(json.dumps(nested(MAX_METADATA_DEPTH))) == nested(MAX_METADATA_DEPTH)
    with pytest.raises(MetadataRejected, match="nested 33 levels deep; the limit is 32"):
        parse_metadata(json.dumps(nested(MAX_METADATA_DEPTH + 1)))


@pytest.mark.parametrize(
    "raw",
    [
        '{"s": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}',
        '{"s": "\\"{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{"}',
    ],
)
def test_brackets_inside_strings_are_not_nesting(raw: str) -> None:
    assert parse_metadata(raw) == json.loads(raw)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ('{"a": 9223372036854775808}', "64 bits"),
        ('{"a": -9223372036854775809}', "64 bits"),
        ('{"a": -Infinity}', "JSON does not allow"),
        ('{"a": 1e400}', "out of range"),
        ('{"a": "\\udc00x"}', "lone UTF-16 surrogate"),
        ('{"a": "x\\u0000"}', "NUL"),
        ('{"a": 1} ' + " " * 17000, "16 KiB"),
    ],
)
def test_values_no_part_of_the_path_can_keep_are_refused(raw: str, why: str) -> None:
    with pytest.raises(MetadataRejected, match=why) as refused:
        parse_metadata(raw)
    assert refused.value.code == "invalid_metadata"


def _pdf_job(caller_metadata: dict[str, object], filename: str) -> Job:
    return Job(
        id=uuid.uuid4(),
        license_use=LicenseUse.non_commercial,
        caller_metadata=caller_metadata,
        source_filename=filename,
        source_kind=SourceKind.pdf,
        source_sha256="0" * 64,
        document_pages=1,
        furniture="separate",
    )


def test_the_manifest_of_a_job_stored_before_the_limits_still_writes() -> None:
    manifest = build_manifest(_pdf_job(nested(2000), "old.pdf"), [])
    assert manifest["metadata"] == {}
    assert json.loads(manifest_json(manifest))["metadata"] == {}


def test_the_manifest_is_indented_utf8_and_keeps_the_deepest_metadata_allowed() -> None:
    metadata = {"client": "Müller & Søn", "deep": nested(MAX_METADATA_DEPTH - 1)}
    manifest = build_manifest(_pdf_job(metadata, "Rechnung Nr. 7 — März.pdf"), [])
    written = manifest_json(manifest)
    assert json.loads(written) == json.loads(json.dumps(manifest))
    assert "Rechnung Nr. 7 — März.pdf".encode() in written
    assert written.startswith(b'{\n  "job_id": ')
