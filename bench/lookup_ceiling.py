#!/usr/bin/env python3
"""The most that prompt-lookup speculation can gain on one greedy answer.

Reads the JSON that `duet run ... --json` prints for a plain greedy decode
(prompt_token_ids, generated_token_ids) and replays the answer with an
oracle drafter: before each forward pass it drafts, from an earlier
occurrence of the context's last tokens, exactly the tokens that the
answer goes on with — never a token that would be rejected. Two oracles:

  recent: the occurrence that lookup_decode's drafter uses (the longest
          suffix match, the most recent among equals; plugins/speculative/
          ngram_draft.cc), its continuation cut at the first wrong token;
  best:   whichever earlier occurrence of at least ngram_min tokens
          continues the answer furthest.

No drafting policy that looks drafts up in the context can keep more tokens
per pass than `best`. With --pass-ms, the cost of a pass of k rows from
`duet bench PIPELINE.yaml --tests pp -p 1,2,...,9 -r 5` (k = 1 + the draft's
length), it also prints the speed-up over plain decode that each oracle
reaches; without it, tokens per pass is the speed-up a free verification
would give.

  duet run configs/smollm2-onednn.yaml --prompt-file bench/prompts/edit-code.txt \\
      --set stages.1.decode.max_new_tokens=256 --json > answer.json
  python3 bench/lookup_ceiling.py answer.json --pass-ms 1:3.37,2:4.58,3:5.40,9:11.57
"""
import argparse
import json
import sys


def matches(context, ngram_min, ngram_max):
    """(shared suffix length, start of the continuation) for each earlier
    occurrence of the context's last token whose suffix shared with the
    context's is at least ngram_min tokens, most recent first."""
    size = len(context)
    out = []
    for end in range(size - 2, -1, -1):
        m = 0
        while m < ngram_max and end - m >= 0 and context[end - m] == context[size - 1 - m]:
            m += 1
        if m >= ngram_min:
            out.append((m, end + 1))
    return out


def kept_from(context, start, limit, answer, at):
    """How many tokens of the continuation at `start` (at most `limit`) agree
    with the answer from position `at`."""
    k = 0
    while k < limit and start + k < len(context) and at + k < len(answer) and \
            context[start + k] == answer[at + k]:
        k += 1
    return k


def replay(prompt, answer, ngram_min, ngram_max, draft_tokens, oracle):
    """The draft lengths of the passes that generate `answer`."""
    context = list(prompt)
    at = 0
    drafts = []
    while at < len(answer):
        room = min(draft_tokens, len(answer) - at - 1)
        found = matches(context, ngram_min, ngram_max)
        kept = 0
        if found and room > 0:
            if oracle == "recent":
                m, start = max(found, key=lambda f: f[0])  # first of the longest: most recent
                kept = kept_from(context, start, min(room, m), answer, at)
            else:
                kept = max(kept_from(context, start, room, answer, at) for _, start in found)
        drafts.append(kept)
        context += answer[at:at + kept + 1]
        at += kept + 1
    return drafts


def parse_costs(text):
    costs = {}
    for item in text.split(","):
        try:
            rows, ms = item.split(":")
            costs[int(rows)] = float(ms)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"'{item}' is not ROWS:MS (e.g. 1:3.37,2:4.58,9:11.57)") from None
        if int(rows) < 1 or float(ms) <= 0:
            raise argparse.ArgumentTypeError(f"'{item}': rows must be >= 1 and MS > 0")
    if 1 not in costs:
        raise argparse.ArgumentTypeError("needs the cost of a 1-row pass (1:MS)")
    return costs


def load_answer(path):
    """(prompt ids, answer ids) from a `duet run --json` output, or exit
    with a one-line error."""
    try:
        with open(path) as f:
            run = json.load(f)
        prompt, answer = run["prompt_token_ids"], run["generated_token_ids"]
    except OSError as e:
        sys.exit(f"lookup_ceiling: cannot read {path}: {e.strerror}")
    except (ValueError, KeyError, TypeError):
        sys.exit(f"lookup_ceiling: {path} is not the JSON of `duet run ... --json` "
                 "(it needs prompt_token_ids and generated_token_ids)")
    if not answer:
        sys.exit(f"lookup_ceiling: {path} has no generated tokens")
    return prompt, answer


def cost_of(costs, rows):
    """A pass of `rows` rows, interpolated between the measured sizes."""
    if rows in costs:
        return costs[rows]
    known = sorted(costs)
    lo = max([r for r in known if r < rows], default=known[0])
    hi = min([r for r in known if r > rows], default=None)
    if hi is None:
        sys.exit(f"--pass-ms has no pass of {rows} rows or more; measure up to {rows}")
    return costs[lo] + (costs[hi] - costs[lo]) * (rows - lo) / (hi - lo)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("answers", nargs="+", help="`duet run --json` outputs of plain decode")
    parser.add_argument("--ngram-min", type=int, default=3)
    parser.add_argument("--ngram-max", type=int, default=32)
    parser.add_argument("--draft-tokens", type=int, default=8)
    parser.add_argument("--pass-ms", type=parse_costs,
                        help="ROWS:MS,... forward-pass times, e.g. 1:3.37,2:4.58,9:11.57")
    args = parser.parse_args()
    if args.ngram_min < 1 or args.ngram_max < args.ngram_min or args.draft_tokens < 1:
        sys.exit("need 1 <= --ngram-min <= --ngram-max and --draft-tokens >= 1")
    for path in args.answers:
        prompt, answer = load_answer(path)
        print(f"{path}: {len(answer)} tokens after a {len(prompt)}-token prompt")
        for oracle in ("recent", "best"):
            drafts = replay(prompt, answer, args.ngram_min, args.ngram_max, args.draft_tokens,
                            oracle)
            line = (f"  {oracle:6}  {len(drafts)} passes, {len(answer) / len(drafts):.2f} tokens "
                    f"per pass (the speed-up with free verification)")
            if args.pass_ms:
                plain = len(answer) * args.pass_ms[1]
                spent = sum(cost_of(args.pass_ms, 1 + d) for d in drafts)
                line += f", {plain / spent:.2f}x at the measured pass costs"
            print(line)


if __name__ == "__main__":
    main()
