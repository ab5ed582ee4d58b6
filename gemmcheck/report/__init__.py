"""What a reviewer sees: allure attachments, labels, defect categories, the
environment, the verdict summary (reports/verdicts.json) and the HTML build.

One module per job; this package re-exports their public names, so
``from gemmcheck import report; report.attach_text(...)`` is how checks use it:

- attach       is allure recording? attach_* / parameter / label (no-ops when not)
- evidence     a failed value check's heatmap, worst elements, source, resources
- heatmap      error / bound heatmap PNG, worst-elements CSV
- source       the kernel's source excerpt, ptxas's resource report
- categories   defect categories and the message prefix they match
- environment  environment.properties, executor.json (CI), write_result_metadata
- verdicts     reports/verdicts.json, its table, pytest-xdist worker files
- labels       allure feature / story / severity / tags, the instantiation a test runs on
- reproduce    the hypothesis example and the command that reruns a failed test
- teardowns    fixture teardowns named for what they do (no ``<lambda>``)
- paths        is a report path writable (checked before any test runs)
- validate     is an allure-results directory well formed
- html         the HTML build (Allure 3 CLI); ``python -m gemmcheck.report`` (__main__)
- overview     the kernel overview, the report's first screen (data; overview_html: the page;
               overview_history: what changed since the previous run)

Checks call the ``attach_*`` functions; each one is a no-op when allure is not
recording (allure-pytest missing, or no results directory), so a check never
needs to know whether a report is being made.

Message convention (every check follows it; categories.json matches on it)
-------------------------------------------------------------------------
A failing check's message starts with the defect class(es) it saw, as
``gemmcheck.verdict.Defect`` values, then a colon::

    wrong_values: matmul_tiled-float32-TILE32 (matmul_tiled<float, 32>), M33xN17xK65 ...
    unwritten_output, wrong_values: matmul_broken_floor_grid-float16-TILE16 ...

``defect_message(defects, text)`` builds that prefix. An environment problem
(no device, a missing tool) says so in words the "Environment problems"
category knows: ``no CUDA device``, ``needs <tool>``, ``not found on PATH``.
Tests whose checks record Verdicts (``VerdictLog.record``) also get a
``defect`` label per defect found, so even a broken variant that was caught
as expected (a passing test) lands in its defect's category.
"""

from gemmcheck.report.attach import (
    active, attach_csv, attach_hypothesis_reproduction, attach_json, attach_png, attach_sanitizer_log,
    attach_session_text, attach_text, attached_names, end_session, installed, label,
    nested_in_recording_session, parameter, start_session, start_test)
from gemmcheck.report.categories import (
    CATEGORIES, Category, allure3_categories, categories_json, category_of, defect_message)
from gemmcheck.report.environment import (
    environment, executor, properties_text, read_properties, write_result_metadata)
from gemmcheck.report.evidence import attach_instance_evidence, attach_judgement
from gemmcheck.report.jsonable import json_default
from gemmcheck.report.heatmap import heatmap_png, worst_elements_csv
from gemmcheck.report.html import ANALYTICS, ROOT, allure_cli, allure_config, build_html, strip_analytics
from gemmcheck.report.labels import (
    FEATURES, INSTANCE_PARAMS, SEVERITY, STORIES, feature_of, instance_of, labels_for, story_of)
from gemmcheck.report.paths import unwritable_dir, unwritable_file
from gemmcheck.report.reproduce import (
    end_reruns, hypothesis_reproduction, rerun_command, rerun_options, start_reruns)
from gemmcheck.report.reproduce import command as rerun_command_line
from gemmcheck.report.source import kernel_source_excerpt, resource_report
from gemmcheck.report.teardowns import name_teardowns, teardown_name
from gemmcheck.report.validate import validate_results
from gemmcheck.report.verdicts import (
    SCHEMA_VERSION, read_worker_verdicts, run_info, summarize, summary_lines, verdict_table, verdicts_document,
    worker_file, worker_parts, write_verdicts)
