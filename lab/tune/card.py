"""The model card of a tuned model: ``README.md`` beside its weights, written from the card's
fields (``lab-model.json``) when the model is saved or its dev split scored again."""

from __future__ import annotations

from lab.tune.dev import DEV_SET, first_stage_text, fusion_text


def model_card(card: dict) -> str:
    h = card["hyperparameters"]
    dev = card["dev"]
    lines = [
        f"# {card['name']}", "",
        f"A {'cross-encoder (reranker)' if card['target'] == 'reranker' else 'bi-encoder (embedding model)'} "
        f"tuned by `lab tune {card['target']}` from `{card['base_model']}`.", "",
        "| | |", "|---|---|",
        f"| weights fingerprint | `{card['fingerprint']}` |",
        f"| training set fingerprint | `{card['training_set']}` |",
        f"| knowledge base fingerprint | `{card['kb']}` |",
        f"| passages | chunks of `{card['index']['experiment']}` (index `{card['index']['key']}`) |",
        f"| questions | {card['questions'].get('train')} trained on ({card['questions'].get('generated')} from eval "
        f"sets, {card['questions'].get('pseudo')} pseudo-queries), {card['questions'].get('dev')} dev"
        + (f"; {card['questions']['beyond_max_length']} left out: their sentence past the tokens the model reads"
           if card['questions'].get('beyond_max_length') else "") + " |",
        f"| loss | {h['loss']} |",
        f"| hyperparameters | lr {h['lr']}, epochs {h['epochs']}, batch {h['batch_size']}, max length "
        f"{h['max_length']}, negatives {h['negatives']}, warm-up {h['warmup_ratio']} |",
        f"| seed | {card['seed']} |",
        *([f"| head | started from a linear probe of {card['head_probe']['pairs']} training pairs (their MRR "
           f"{card['head_probe']['train_mrr']:.4f}, logits' spread {card['head_probe']['logit_std']:.4f}) |"]
          if card.get("head_probe") else []),
        f"| steps | {card['steps']} |",
        f"| wall time | {card['wall_s']} s (training {card['train_s']} s, {card['pairs_per_s']} rows/s"
        f"{', on ' + card['device'] if card.get('device') else ''}) |",
        f"| final loss | {card['final_loss']:.4f} (mean {card['mean_loss']:.4f}) |",
    ]
    if dev.get("mrr_after") is not None:
        lines.append(f"| dev MRR | {dev['mrr_before']:.4f} before, {dev['mrr_after']:.4f} after ({dev['n']} questions; "
                     f"span MRR of retrieval-only runs over `{DEV_SET}`) |")
    if dev.get("fusion"):
        lines.append(f"| dev MRR fused with the first stage | {fusion_text(dev['fusion'])} "
                     "(z(model) + w * z(dense similarity)) |")
    for stage_name, stage in (dev.get("first_stages") or {}).items():
        lines.append(f"| dev MRR over another first stage | {first_stage_text(stage_name, stage)} |")
    if dev.get("curve"):
        lines.append("| learning curve (dev MRR against steps) | " + "; ".join(
            f"step {p['step']}: alone {_f(p['mrr_after'])}, best fused {_f(p['best_fused'])}" for p in dev["curve"])
            + f" (first stage {_f(dev['curve'][0]['mrr_before'])}) |")
    name = card["name"]
    w = dev.get("first_stage_weight")
    use = (f"reranker:\n  name: sentence_transformer   # or flag_embedding\n  model: tuned/{name}\n  top_n: 3"
           + (f"\n  first_stage_weight: {w:g}   # picked on the dev split" if w is not None else "")
           if card["target"] == "reranker" else f"embedding:\n  model: tuned/{name}")
    lines += ["", "Use it in an experiment config:", "", "```yaml", use, "```", ""]
    return "\n".join(lines)




def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"
