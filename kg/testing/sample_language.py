"""The sample graph's checked language summary (chiplore.kg.testing.sample): an entry per construct of the old and the
new toolchain, with doc examples and their compile checks, an LLM statement whose example failed, the
rule and claim each entry links to, and the new version's changed entries superseding the old ones."""

from __future__ import annotations

from chiplore.core.ids import content_sha
from chiplore.kg.models import Activity, Check, LanguageEntry, LanguageExample
from chiplore.kg.repo.nodes import Link, Ref

# (construct, kind, syntax, how it changed from OLD to NEW): the language summary's entries
CONSTRUCTS = (
    ("cast", "stage", ".cast(D)", "removed"),
    ("widen", "stage", ".widen(D)", "added"),
    ("decode", "stage", ".decode(D)", "unchanged"),
    ("reduce_clusters", "reduction", "reduce_clusters(T)", "changed"),
)


def language_summary(nodes: list, links: list[Link], *, target: str, versions: tuple[str, str],
                     chunks: dict[str, str], rule: str, claims: dict[str, str],
                     librarian: Activity) -> None:  # fmt: skip
    """Add to `nodes` and `links` the checked DSL summary of the two `versions` (old, new): an entry per
    construct and version, each with a doc example citing that version's chunk in `chunks` and its
    compile check, linked to `rule` and to that version's claim in `claims`; one LLM statement whose
    example failed; the new version's changed entries superseding the old ones."""
    old, new = versions
    for version in (old, new):
        for index, (name, kind, syntax, change) in enumerate(CONSTRUCTS):
            available = not ((version == old and change == "added") or (version == new and change == "removed"))
            source = f"// {name} under {version}\nkernel show_{name} {{ {syntax} }}"
            example = LanguageExample(id=content_sha(source), source=source, origin="doc", version=version,
                                      statement=f"{syntax} under {version}", constructs=[name])  # fmt: skip
            check = Check(id=f"check-{version}-{name}", method="compile",
                          verdict="confirms" if available else "contradicts",
                          detail="compiles cleanly" if available else "E0103: use another construct")  # fmt: skip
            entry = LanguageEntry(
                id=LanguageEntry.id_of(target, version, name), name=name, version=version, kind=kind, syntax=syntax,
                meaning=f"what {syntax} does", availability="available" if available else "unavailable",
                instead="" if available else "use .widen(D)", verdict="confirmed" if index % 2 else "contradicted",
                why="" if index % 2 else f"the docs' example of {name} computes another value", examples=1,
                fingerprint=f"{'available' if available else 'unavailable'}|E0201", toolchain=version,
                change=(change if version == new else ""), change_from=old if version == new else "",
                before=f"{'unavailable' if change == 'added' else 'available'}|E0201" if version == new else "",
                change_detail=f"{name}: {change}" if version == new else "",
                status="superseded" if version == old and change != "unchanged" else "current",
            )  # fmt: skip
            nodes += [example, check, entry]
            links += [
                Link(Ref.to(entry), "UNDER", Ref("Toolchain", f"{target}@{version}")),
                Link(Ref.to(entry), "CREATED_BY", Ref.to(librarian)),
                Link(Ref.to(entry), "CHECKED_BY", Ref.to(check)),
                Link(Ref.to(check), "USED", Ref.to(example)),
                Link(Ref.to(check), "UNDER", Ref("Toolchain", f"{target}@{version}")),
                Link(Ref.to(example), "CITES", Ref("DocChunk", chunks[version])),
                Link(Ref.to(entry), "CONSTRAINED_BY", Ref("LegalityRule", rule)),
                Link(Ref.to(entry), "STATES", Ref("Claim", claims[version])),
            ]  # fmt: skip
            if version == new and change != "unchanged":
                links.append(
                    Link(Ref.to(entry), "SUPERSEDES", Ref("LanguageEntry", LanguageEntry.id_of(target, old, name)))
                )
            if index == 0:  # an LLM librarian's statement whose example did not compile: not kept as true
                llm_source = f"// llm's {name} under {version}\nkernel llm_{name} {{ {syntax}.oops }}"
                llm = LanguageExample(id=content_sha(llm_source), source=llm_source, origin="llm", version=version,
                                      statement=f"{syntax} chains", constructs=[name])  # fmt: skip
                refused = Check(id=f"check-{version}-{name}-llm", method="compile", verdict="contradicts",
                                detail="E0100: unexpected token")  # fmt: skip
                nodes += [llm, refused]
                links += [
                    Link(Ref.to(entry), "CHECKED_BY", Ref.to(refused)),
                    Link(Ref.to(refused), "USED", Ref.to(llm)),
                ]
