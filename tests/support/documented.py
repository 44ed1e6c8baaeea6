"""What the documentation shows a user, extracted literally: every document's fenced code blocks, its YAML examples,
command lines and links, and the shipped job files (jobs/*/*.yaml).

Documents: every README.md in the tree (hidden folders, runs/, node_modules and __pycache__ left out), every page of
docs/ (docs/*.md) and CHANGELOG.md. All follow the same rules. A fenced block is a `yaml` example, a command block
(`bash`, `sh`, `shell`, `console`, or a bare block whose lines start with a command: the jobs' READMEs write their
command lines so) or something else (the layout tree of docs/development.md).

YAML examples become DistributedTrainings to check (`checked_jobs`):
- a document with `kind: DistributedTraining` is taken as it is;
- a document with another kind is not a kubetrain object (the MPIJob of docs/mpi-operator.md); the tests list
  each one, by file, heading and kind, with why it is not checked;
- a document without a kind is a fragment of one. Its top keys say where it goes: DistributedTraining spec fields
  (the CRD's spec properties: runPolicy, scheduling, ...) go under `spec`, `metadata`/`spec` at the top of the object;
  it is deep-merged (mappings merged key by key, anything else replaced) into `BASE`, a small valid job of the
  documentation's own image and command with 3 workers, so that the Volcano gang fragment's `minAvailable: 3` fits.
  A fragment whose top keys fit neither is an error naming it, so a new kind of fragment cannot be skipped silently.
- an inline `spec.<path>: <yaml>` span in the prose (`spec.env: [{name: HOROVOD_CYCLE_TIME, value: "20"}]`) is a
  fragment placed at that path;
- `PROSE_EXAMPLES`: settings the prose describes without a YAML block (GPU node selector and toleration, the
  podTemplate fields of the resource table), each with the words of its file it takes literally; those words must
  still be in that file.

Links: every `[text](target)` of a document's prose whose target is a file of the repository (not a URL), with its
`#anchor` if it has one (`links`); `anchors` gives the anchors a document's headings make, as GitHub makes them.

This module is also loaded by tests/controlplane/test_documented_yaml.py (by file path, see `load` there).
"""

from __future__ import annotations

import copy
import os
import re
import shlex
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubetrain.schema import crd_schema

REPO = Path(__file__).resolve().parents[2]
JOB_FILES = tuple(sorted(REPO.glob("jobs/*/*.yaml")))
API_VERSION = "kubetrain.dev/v1alpha1"
KIND = "DistributedTraining"
_PRUNED = {"node_modules", "runs", "__pycache__"}

# The base a fragment is merged into: the documentation's own cifar-mixup image and command, 3 workers (see above).
BASE_SPEC: dict[str, Any] = {
    "image": "kubetrain/cifar-mixup:0.1.0",
    "command": ["python", "-m", "cifar_mixup"],
    "workers": 3,
}

# Programs a command line may start with (besides NAME=value assignments, .../python and the repository's scripts).
COMMAND_WORDS = ("kubetrain", "make", "python", "python3", "pytest", "helm", "kubectl", "kind", "docker",
                 "horovodrun", "mpirun")
COMMAND_BLOCK_LANGUAGES = ("bash", "sh", "shell", "console")
_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w-]*)\s*$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_COMMENT = re.compile(r"\s+#(\s.*)?$")
_INLINE = re.compile(r"`([^`]+)`")
_INLINE_SPEC = re.compile(r"^(spec(?:\.[A-Za-z]+)+): (.+)$")
_PYTHON_M = re.compile(r"python3? -m ([A-Za-z_][A-Za-z0-9_.]*)")


def rel(path: Path) -> str:
    return str(path.relative_to(REPO))


def document_paths() -> list[Path]:
    """Every README.md in the tree, the pages of docs/ and CHANGELOG.md."""
    found = []
    for directory, subdirectories, files in os.walk(REPO):
        subdirectories[:] = sorted(d for d in subdirectories if not d.startswith(".") and d not in _PRUNED)
        if "README.md" in files:
            found.append(Path(directory) / "README.md")
    found += (REPO / "docs").glob("*.md")
    found += [path for path in (REPO / "CHANGELOG.md",) if path.is_file()]
    return sorted(set(found))


@dataclass(frozen=True)
class Block:
    """A fenced code block: where it is, the heading it is under, its language and its text (dedented)."""

    file: str
    line: int
    heading: str
    lang: str
    text: str


def code_blocks(path: Path) -> list[Block]:
    blocks: list[Block] = []
    heading = ""
    opened: tuple[int, str, str] | None = None
    body: list[str] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if opened is None:
            fence = _FENCE.match(line)
            if fence:
                opened, body = (number, fence["indent"], fence["lang"]), []
            elif line.startswith("#"):
                heading = line.lstrip("#").strip()
        elif line.strip() == "```":
            start, indent, lang = opened
            text = "\n".join(item[len(indent):] if item.startswith(indent) else item for item in body)
            blocks.append(Block(rel(path), start, heading, lang, textwrap.dedent(text)))
            opened = None
        else:
            body.append(line)
    return blocks


def prose(path: Path) -> str:
    """The document without its fenced blocks (their lines blanked, so line numbers stay)."""
    lines, inside = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line) or (inside and line.strip() == "```"):
            inside = not inside
            lines.append("")
        else:
            lines.append("" if inside else line)
    return "\n".join(lines)


def inline_spans(path: Path) -> list[tuple[int, str]]:
    """Every `code` span of the prose (it may wrap onto the next line), whitespace collapsed, with its line."""
    text = prose(path)
    return [(text.count("\n", 0, match.start()) + 1, " ".join(match.group(1).split()))
            for match in _INLINE.finditer(text) if "\n\n" not in match.group(1)]


def squeezed(text: str) -> str:
    return " ".join(text.split())


# ---------------------------------------------------------------------------------------------------------------------
# YAML examples


@dataclass(frozen=True)
class Example:
    """One documented DistributedTraining to check: `body` is the object the tests parse, render and dry-run."""

    id: str
    source: str  # where a reader finds it
    body: dict[str, Any]
    written: Any = None  # the example as the documentation writes it (a fragment before placing), None for job files
    path: Path | None = None  # the job file, sent to the API server as it is

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def gang(self) -> Mapping[str, Any] | None:
        return ((self.body.get("spec") or {}).get("scheduling") or {}).get("gang")


@dataclass(frozen=True)
class YamlDocument:
    file: str
    line: int
    heading: str
    index: int  # the document's place in its block (`---` separated), from 0
    count: int  # documents in the block
    document: Any

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}" + (f"#{self.index}" if self.count > 1 else "")

    @property
    def kind(self) -> str | None:
        return self.document.get("kind") if isinstance(self.document, Mapping) else None


def yaml_documents() -> list[YamlDocument]:
    documents = []
    for path in document_paths():
        for block in code_blocks(path):
            if block.lang not in ("yaml", "yml"):
                continue
            loaded = [doc for doc in yaml.safe_load_all(block.text) if doc is not None]
            documents += [YamlDocument(block.file, block.line, block.heading, index, len(loaded), doc)
                          for index, doc in enumerate(loaded)]
    return documents


def crd_spec_schema() -> dict[str, Any]:
    return dict(crd_schema()["properties"]["spec"])


def spec_fields() -> set[str]:
    return set(crd_spec_schema()["properties"])


def deep_merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(dict(base))
    for key, value in overlay.items():
        if isinstance(merged.get(key), Mapping) and isinstance(value, Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def example_name(source: str) -> str:
    """A DNS label for a fragment's job, from where it is written: docs/elastic.md:7 -> doc-docs-elastic-7."""
    stem = re.sub(r"[^a-z0-9]+", "-", source.lower().replace(".md", "")).strip("-")
    return f"doc-{stem}"[-52:].lstrip("-0123456789") or "doc"


def place_fragment(fragment: Any, source: str) -> dict[str, Any]:
    """A fragment of a DistributedTraining as a whole one: merged into BASE where its top keys say (see above)."""
    if not isinstance(fragment, Mapping) or not fragment:
        raise ValueError(f"{source}: a YAML example that is neither an object with a kind nor a mapping of fields")
    keys = set(fragment)
    if keys <= spec_fields():
        overlay: Mapping[str, Any] = {"spec": fragment}
    elif keys <= {"metadata", "spec"}:
        overlay = fragment
    else:
        raise ValueError(f"{source}: cannot tell where this fragment goes: its keys {sorted(keys)} are neither "
                         f"DistributedTraining spec fields ({', '.join(sorted(spec_fields()))}) nor metadata/spec")
    base = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": example_name(source)}, "spec": BASE_SPEC}
    return deep_merge(base, overlay)


@dataclass(frozen=True)
class ProseExample:
    """A setting the prose shows without a YAML block: `quote` (the words of `file`, backticks included) and the
    spec fields it stands for."""

    file: str
    quote: str
    spec: dict[str, Any] = field(default_factory=dict)


PROSE_EXAMPLES = (
    ProseExample("docs/gpus.md", '`spec.scheduling.nodeSelector` (e.g. `nvidia.com/gpu.present: "true"`)',
                 {"scheduling": {"nodeSelector": {"nvidia.com/gpu.present": "true"}}}),
    ProseExample("docs/gpus.md",
                 "`spec.scheduling.tolerations` (commonly "
                 "`{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}`)",
                 {"scheduling": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                                  "effect": "NoSchedule"}]}}),
    ProseExample("docs/gpus.md", "private registries: `spec.podTemplate.spec.imagePullSecrets`",
                 {"podTemplate": {"spec": {"imagePullSecrets": [{"name": "registry-credentials"}]}}}),
    # The resource table's podTemplate row: every field it names, a container of each role's name and one of another.
    ProseExample("docs/reference.md",
                 "`{metadata, spec}` merged into every pod (annotations, securityContext, imagePullSecrets, ...); a "
                 "container named `worker` or `launcher` changes that role's container only, one of another name "
                 "(with its `image`) is added to every pod",
                 {"podTemplate": {
                     "metadata": {"annotations": {"example.com/team": "research"}},
                     "spec": {"securityContext": {"supplementalGroups": [2000]},
                              "imagePullSecrets": [{"name": "registry-credentials"}],
                              "containers": [{"name": "worker", "env": [{"name": "NCCL_DEBUG", "value": "INFO"}]},
                                             {"name": "launcher", "resources": {"limits": {"cpu": "1"}}},
                                             {"name": "log-shipper", "image": "registry.example.com/shipper:1.0"}]}}}),
)


def prose_quote_present(example: ProseExample) -> bool:
    return squeezed(example.quote) in squeezed((REPO / example.file).read_text(encoding="utf-8"))


def inline_spec_fragments() -> list[tuple[str, dict[str, Any]]]:
    """(source, fragment) for every inline `spec.<path>: <yaml>` span."""
    found = []
    for path in document_paths():
        for line, span in inline_spans(path):
            match = _INLINE_SPEC.match(span)
            if match:
                value: Any = yaml.safe_load(match.group(2))
                for key in reversed(match.group(1).split(".")[1:]):
                    value = {key: value}
                found.append((f"{rel(path)}:{line}", value))
    return found


def job_file_examples() -> list[Example]:
    return [Example(rel(path), rel(path), yaml.safe_load(path.read_text(encoding="utf-8")), path=path)
            for path in JOB_FILES]


def checked_jobs() -> list[Example]:
    """Every documented DistributedTraining: the job files, the documents' examples (fragments placed), the inline
    spec spans and the prose examples."""
    examples = job_file_examples()
    for document in yaml_documents():
        if document.kind == KIND:
            examples.append(Example(document.id, f"{document.id} ({document.heading})", dict(document.document),
                                    document.document))
        elif document.kind is None:
            examples.append(Example(document.id, f"{document.id} ({document.heading}), a fragment",
                                    place_fragment(document.document, document.id), document.document))
    for source, fragment in inline_spec_fragments():
        examples.append(Example(f"{source}-inline", f"{source}, inline", place_fragment(fragment, source),
                                fragment))
    for index, prose_example in enumerate(PROSE_EXAMPLES):
        source = f"{prose_example.file}-prose-{index}"
        examples.append(Example(source, f"{prose_example.file}: {prose_example.quote}",
                                place_fragment(prose_example.spec, source), prose_example.spec))
    return examples


def other_kinds() -> list[YamlDocument]:
    """YAML documents of the documentation that are objects of another kind than DistributedTraining."""
    return [document for document in yaml_documents() if document.kind not in (None, KIND)]


@dataclass(frozen=True)
class Misspelling:
    """A job file with one optional spec field misspelled (its second letter dropped: workers -> wrkers)."""

    job_file: Path
    body: dict[str, Any]
    field: str  # the misspelled field's path, as the API server names it: spec.wrkers

    @property
    def id(self) -> str:
        return self.field


def misspelled(key: str) -> str:
    return key[0] + key[2:]


def _optional_fields(value: Mapping[str, Any], schema: Mapping[str, Any],
                     prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Paths of the fields in `value` that the schema knows and does not require (a typo there goes unnoticed unless
    unknown fields are refused), into nested objects with a fixed set of fields."""
    known, required = schema.get("properties") or {}, schema.get("required") or []
    for key, item in value.items():
        if key not in known:
            continue
        if key not in required:
            yield (*prefix, key)
        nested = known[key]
        free_form = nested.get("x-kubernetes-preserve-unknown-fields")
        if isinstance(item, Mapping) and "properties" in nested and not free_form:
            yield from _optional_fields(item, nested, (*prefix, key))


def misspellings() -> list[Misspelling]:
    """One misspelling of every optional spec field the job files set (each field once, in the first file that sets
    it)."""
    found: dict[tuple[str, ...], Misspelling] = {}
    for path in JOB_FILES:
        body = yaml.safe_load(path.read_text(encoding="utf-8"))
        for keys in _optional_fields(body["spec"], crd_spec_schema()):
            if keys in found:
                continue
            mutated = copy.deepcopy(body)
            parent = mutated["spec"]
            for key in keys[:-1]:
                parent = parent[key]
            parent[misspelled(keys[-1])] = parent.pop(keys[-1])
            found[keys] = Misspelling(path, mutated, ".".join(["spec", *keys[:-1], misspelled(keys[-1])]))
    return list(found.values())


# ---------------------------------------------------------------------------------------------------------------------
# Command lines


@dataclass(frozen=True)
class Command:
    file: str
    line: int
    text: str
    inline: bool


def _is_script(word: str) -> bool:
    path = REPO / word
    return "/" in word and path.is_file() and os.access(path, os.X_OK)


def program_of(text: str) -> str | None:
    """The program a command line starts (after NAME=value assignments), if it is one a reader would run."""
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    words = words[next((i for i, word in enumerate(words) if not _ASSIGNMENT.match(word)), len(words)):]
    if not words:
        return None
    first = words[0]
    if first in COMMAND_WORDS or first.endswith("/python") or _is_script(first):
        return first
    return None


def _block_lines(block: Block) -> Iterator[tuple[int, str]]:
    """The block's lines with `\\` continuations joined and comments removed, each with its line number."""
    pending, start = "", 0
    for offset, raw in enumerate(block.text.splitlines(), 1):
        if not pending:
            start = block.line + offset
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        text = squeezed(_COMMENT.sub("", pending + line.strip()))
        pending = ""
        if text and not text.startswith("#"):
            yield start, text


def section_commands(path: Path, heading: str) -> list[str]:
    """The command lines of the one command block under `heading` in `path`, in order (the kind quick start)."""
    blocks = [block for block in code_blocks(path) if block.heading == heading
              and block.lang in COMMAND_BLOCK_LANGUAGES]
    assert len(blocks) == 1, f"{rel(path)}: expected one command block under '{heading}', found {len(blocks)}"
    return [text for _, text in _block_lines(blocks[0])]


def documented_commands() -> list[Command]:
    """Every command line of the documentation: each line of a command block (a bare block's lines only where they
    start a command), and each inline span that starts a command (two words at least, or one of the repository's
    scripts)."""
    commands = []
    for path in document_paths():
        for block in code_blocks(path):
            if block.lang in COMMAND_BLOCK_LANGUAGES or block.lang == "":
                for line, text in _block_lines(block):
                    if block.lang or program_of(text):
                        commands.append(Command(block.file, line, text, inline=False))
        for line, span in inline_spans(path):
            program = program_of(span)
            if program and (len(span.split()) > 1 or _is_script(program)):
                commands.append(Command(rel(path), line, span, inline=True))
    return commands


def python_modules() -> list[str]:
    """Every module the documentation runs as `python -m <module>` (placeholders such as `<program>` are not
    modules)."""
    modules: set[str] = set()
    for path in document_paths():
        modules.update(_PYTHON_M.findall(path.read_text(encoding="utf-8")))
    return sorted(modules)


# ---------------------------------------------------------------------------------------------------------------------
# Tables and links


def table_after(file: str, heading: str, after: str) -> list[list[str]]:
    """The rows (cells, without the header) of the first table after the sentence starting `after` in the section
    `heading` (a heading of any level) of `file`."""
    text = (REPO / file).read_text(encoding="utf-8")
    section = re.split(rf"^#+ {re.escape(heading)}$", text, maxsplit=1, flags=re.MULTILINE)[1]
    rows, seen = [], False
    for line in section[section.index(after):].splitlines():
        if line.startswith("|"):
            seen = True
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if not set("".join(cells)) <= set("-: "):
                rows.append(cells)
        elif seen:
            break
    return rows[1:]


_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


@dataclass(frozen=True)
class Link:
    file: str
    line: int
    target: str  # as written: a path relative to the document, maybe with #anchor

    @property
    def path(self) -> Path:
        """The file the link leads to (the document itself for a bare #anchor)."""
        target = self.target.split("#", 1)[0]
        return (REPO / self.file).parent / target if target else REPO / self.file

    @property
    def anchor(self) -> str | None:
        return self.target.split("#", 1)[1] if "#" in self.target else None


def links() -> list[Link]:
    """Every link of the documents' prose to a file of the repository (URLs and mail addresses left out)."""
    found = []
    for path in document_paths():
        for number, line in enumerate(prose(path).splitlines(), 1):
            for target in _LINK.findall(line):
                if not re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    found.append(Link(rel(path), number, target))
    return found


def anchors(path: Path) -> set[str]:
    """The anchors GitHub makes for a Markdown file's headings: lower case, punctuation but - and _ dropped, spaces
    to -, and -1, -2, ... after a repeated one."""
    made: set[str] = set()
    for line in prose(path).splitlines():
        heading = re.match(r"^#+ (.+)$", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower().replace("`", "")).replace(" ", "-")
        anchor, count = slug, 0
        while anchor in made:
            count += 1
            anchor = f"{slug}-{count}"
        made.add(anchor)
    return made
