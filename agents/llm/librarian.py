"""The LLM librarian (`chiplore learn --policy llm`): one model call per doc page (or per run of its
paragraphs, when the prompt has a budget), answering with a ClaimSet whose every claim cites the
paragraph it comes from. A claim counts only when its citation checks out: its text is in the cited
paragraph (and so is its number, when it states one). The rest are dropped and counted; the
measurements judge what stays, as they judge the builtin's.

The ClaimSet comes in the best structured output the endpoint supports (`output.py`): the ClaimSet
tool, a JSON object, or the JSON object in a fenced block. A malformed answer, or a page the
endpoint refuses (a page past the model's context), gives that page no claims and is recorded as an
Activity (policy `llm-answer`) with the reason; the other pages go on."""

from __future__ import annotations

import re
import uuid
from typing import Literal

from langchain.agents import create_agent
from langchain.agents.structured_output import ToolStrategy
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from chiplore.agents.llm.config import LLMConfig, OutputMode
from chiplore.agents.llm.endpoint import LLMRefused
from chiplore.agents.llm.language import tokens
from chiplore.agents.llm.output import Malformed, instructions, json_answer, output_mode, structured, text_of
from chiplore.agents.llm.policy import Calls, TokenBudget, ask, chat_model, run_agent, template
from chiplore.core.clock import utc_now
from chiplore.core.params import ParamRegistry
from chiplore.ingest.chunks import Chunk
from chiplore.ingest.librarian import NUMBER_WORDS, ExtractedClaim, Librarian
from chiplore.kg.models import Activity
from chiplore.kg.repo.knowledge import record_activity
from chiplore.kg.store import GraphStore


class CitedClaim(BaseModel):
    text: str = Field(description="the sentence as the page words it, copied exactly")
    paragraph: int = Field(description="the number of the paragraph it is in")
    kind: Literal["quantity", "limit", "rule"]
    concept: str = Field(description="what it is about, e.g. dma.startup or construct:dma")
    param: str | None = Field(None, description="the hardware parameter it states, if it states one")
    value: float | None = None
    unit: str | None = None


class ClaimSet(BaseModel):
    """Every checkable statement of the page: quantities with units, limits, must/cannot rules."""

    claims: list[CitedClaim] = Field(description='the claims, each {"text": the sentence copied exactly, '
                                     '"paragraph": its number, "kind": "quantity" or "limit" or "rule", '
                                     '"concept": what it is about, "param": a parameter key or null, '
                                     '"value": a number or null, "unit": a unit or null}')  # fmt: skip


def parts(prose: list[Chunk], max_tokens: int) -> list[list[Chunk]]:
    """A page's paragraphs in runs of at most `max_tokens` (0: one run), for a model with a small
    context: one call per run, each paragraph in one run (a longer paragraph alone in its own)."""
    out: list[list[Chunk]] = []
    size = 0
    for chunk in prose:
        cost = tokens(chunk.text) + 4
        if not out or (max_tokens and size + cost > max_tokens):
            out.append([])
            size = 0
        out[-1].append(chunk)
        size += cost
    return out


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[*`]", "", text)).strip().lower()


def cited(claim: CitedClaim, chunk: Chunk) -> bool:
    """The citation check: the claim's words, and its number, are in the paragraph it cites."""
    if _flat(claim.text) not in _flat(chunk.text):
        return False
    if claim.value is None or claim.unit == "bool":  # a yes/no fact: its words are its citation
        return True
    numbers = {float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", claim.text)}
    numbers |= {float(v) for word, v in NUMBER_WORDS.items() if re.search(rf"\b{word}\b", claim.text, re.I)}
    # as written, in KB or GHz, or inverted ("one flit per cycle" is one cycle per flit)
    candidates = {n * scale for n in numbers for scale in (1, 1024, 1e9)} | {1 / n for n in numbers if n}
    return any(abs(claim.value - c) <= 1e-9 * max(1.0, abs(claim.value)) for c in candidates)


class LLMLibrarian(Librarian):
    policy = "llm"

    def __init__(self, config: LLMConfig, store: GraphStore, params: ParamRegistry, budget: TokenBudget | None = None,
                 model: BaseChatModel | None = None) -> None:  # fmt: skip
        self.config, self.store, self.params = config, store, params
        self.budget = budget or TokenBudget(config.token_budget)
        self.model = model or chat_model(config)
        self.rejected: list[str] = []  # claims whose citation did not check out
        self._mode: OutputMode | None = None

    @property
    def mode(self) -> OutputMode:
        if self._mode is None:
            self._mode = output_mode(self.model, self.config, self.store)
        return self._mode

    def extract_page(self, chunks: list[Chunk], page_title: str) -> list[tuple[Chunk, ExtractedClaim]]:
        prose = [chunk for chunk in chunks if not chunk.code]
        keys = "\n".join(f"- {p.key} ({p.unit}): {p.meaning}" for p in self.params.values())
        system = template("librarian").format(params=keys)
        out = []
        for part in parts(prose, self.config.prompt_tokens - tokens(system) if self.config.prompt_tokens else 0):
            if self.budget.spent:
                break
            out += self._extract(system, part, page_title)
        return out

    def _extract(self, system: str, prose: list[Chunk], page_title: str) -> list[tuple[Chunk, ExtractedClaim]]:
        """The claims of some paragraphs of a page, in one model call."""
        calls = Calls(self.store, "librarian", self.config, self.budget)
        numbered = "\n\n".join(f"[{i}] {chunk.text}" for i, chunk in enumerate(prose))
        page = HumanMessage(f"Page: {page_title}\n\n{numbered}")
        try:
            answer = self._answer(system, page, calls)
        except (Malformed, LLMRefused) as error:
            what = "malformed answer" if isinstance(error, Malformed) else "the endpoint refused the request"
            self._failed(f"{what} for page {page_title!r}: {error}")
            return []
        out = []
        for claim in answer.claims:
            chunk = prose[claim.paragraph] if 0 <= claim.paragraph < len(prose) else None
            if chunk is None or not cited(claim, chunk):
                self.rejected.append(claim.text)
                continue
            out.append((chunk, ExtractedClaim(text=claim.text, kind=claim.kind, concept=claim.concept,
                                              param=claim.param, value=claim.value, unit=claim.unit)))  # fmt: skip
        return out

    def _answer(self, system: str, page: HumanMessage, calls: Calls) -> ClaimSet:
        """The page's ClaimSet in the endpoint's mode (Malformed when there is none)."""
        mode = self.mode
        if mode == "tools":
            agent = create_agent(self.model, tools=[], system_prompt=system, response_format=ToolStrategy(ClaimSet))
            state = run_agent(agent, [page], calls, self.config)
            answer: ClaimSet | None = state.get("structured_response")
            if answer is None:
                raise Malformed("no ClaimSet")
            return answer
        system = system.replace("Answer with the ClaimSet tool.", instructions(mode, ClaimSet))
        said = ask(structured(self.model, mode, ClaimSet), [SystemMessage(system), page], calls, self.config)
        return json_answer(text_of(said), ClaimSet, strict=False)

    def _failed(self, what: str) -> None:
        """A page without claims because of the model: recorded, as every failure is."""
        record_activity(self.store, Activity(id=f"answer-{uuid.uuid4().hex[:16]}", role="librarian",
                                             policy="llm-answer", model=self.config.model, ended_at=utc_now(),
                                             outcome=self.config.redact(what)[:300]))  # fmt: skip
