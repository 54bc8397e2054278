#!/usr/bin/env python3
"""Deterministic generator of a small artificial parallel corpus ("toy" data).

Source language ("Plainish"): English-like words, SVO order.
Target language ("Veltic"): invented words, head-final order (S O V, postpositions,
noun-adjective inversion, relative clauses before their head, subordinate clause first).
Both languages are made up for this corpus; the target is a deterministic function of the
source, so every source sentence has exactly one correct translation.

Output (one sentence per line, UTF-8, '\\n' line endings, no empty lines):
    <out-dir>/{train,dev,test}.src   source sentences
    <out-dir>/{train,dev,test}.tgt   target sentences
    <out-dir>/README.md              description, lexicon, statistics, checksums
Usage (from anywhere):
    python3 scripts/make_toy_corpus.py [--out-dir DIR (default data/toy)] [--seed 1] [--train 6000] [--dev 500] [--test 500]

Determinism: the only source of randomness is one random.Random(seed) instance, used solely
through rng.random() (floats from the Mersenne Twister, identical on every Python 3.x); all
choices are made by comparing those floats with fixed probability tables or by indexing
fixed lists.  No set/dict iteration order or hashing influences the output.  Pairs are
generated in one stream: first train, then dev, then test; a source sentence that was
already produced (in any split) is discarded and drawn again, so the splits share no
sentence and no split contains a sentence twice.  Sentences whose source side exceeds
MAX_SRC_LEN tokens (including the final " .") are discarded and drawn again.

Grammar of one source sentence (probabilities are those in the constants below):
    SENT    -> CLAUSE [CONJ CLAUSE] "."              second clause with P_SECOND_CLAUSE
    CLAUSE  -> NP_subj VERB NP_obj PP{0,2} [ADV]     subject noun is always animate
             | NP_subj ("does"|"do") "not" VERB_base NP_obj PP{0,2} [ADV]   (P_NEG)
    NP      -> DET? ADJ{0,2} NOUN [ "that" VERB NP_simple ]     (relative clause, P_REL;
                                                                 its head is animate)
    NP_simple -> DET? ADJ{0,1} NOUN                  (inside PPs and relative clauses)
    PP      -> PREP NP_simple                        (two PPs of one clause use different
                                                      prepositions)
  * Nouns are singular or plural (P_PLURAL).  Determiners depend on number:
    singular: the, a, this, every, my, your;  plural: the, these, some, my, your, or none
    (bare plural).  Adjectives of one NP are distinct.
  * The verb agrees with its subject: "sees" after a singular subject, "see" after a plural
    one ("does not" / "do not" when negated); the verb of a relative clause agrees with the
    head noun of that clause.
  * All PPs and the adverb belong to the main verb of their clause (relative clauses
    never contain PPs or adverbs), so the source has no attachment ambiguity.
  * "a" is written "an" before a word starting with a vowel letter (an apple, an old cat).
  * The first token is capitalised; the sentence ends with " .".

Translation rules (applied to the tree, each clause independently):
  1. Word translation: every source word has one target word (some are two tokens, e.g.
     teacher -> "sévi rupa", help -> "ayu dáru"); singular and plural nouns map to the same
     target noun, "this"/"these" both map to "sé" and "a"/"an" both to "en".  Bare
     plurals have no determiner.
  2. NP:  DET ADJ1 ADJ2 NOUN  ->  DET' NOUN' ADJ2' ADJ1' [ka]
     (determiner stays first, adjectives follow the noun in mirror order, the plural marker
     "ka" ends the NP when the noun is plural).
  3. Relative clause:  NP_head "that" VERB NP_rel  ->  NP_rel' ö VERB' [ne] ri NP_head'
     (the whole relative clause precedes its head; "ri" is the relative particle; "ne"
     marks a plural head).
  4. Clause:  SUBJ VERB OBJ PP1 PP2 ADV  ->  SUBJ' PP2' PP1' OBJ' ö ADV' [mé] VERB' [ne]
     where PP' = NP' POSTPOSITION (postpositions follow their NP); the PPs are moved in
     front of the object in reverse order; the object NP is followed by the object-case
     particle "ö"; the adverb comes right before the verb; negation ("does not"/"do not")
     becomes the particle "mé" right before the verb; the verb is clause-final and is
     followed by "ne" when the subject is plural.
  5. Sentence: coordinating conjunctions (and, but) keep clause order:
        C1 CONJ C2 .  ->  C1' CONJ' C2' ·
     subordinating conjunctions (because, while, although) put the subordinate clause
     first, followed by the conjunction and a comma:
        C1 CONJ C2 .  ->  C2' CONJ' , C1' ·
  6. The first target token is capitalised (str.upper() of its first character, e.g.
     "ölmar" -> "Ölmar"); the target sentence ends with " ·" (U+00B7 MIDDLE DOT).
"""

import argparse
import hashlib
import os
import sys

import random

# ----------------------------------------------------------------------------------------
# Probabilities and limits (changing any of these changes the corpus).
P_PLURAL = 0.35          # a noun is plural
P_REL = 0.12             # a subject/object NP gets a relative clause "that VERB NP"
P_NEG = 0.10             # a clause is negated ("does not" / "do not")
P_ADV = 0.25             # a clause ends with an adverb
P_SECOND_CLAUSE = 0.26   # a sentence has a second clause joined by a conjunction
PP_COUNT = ((0.62, 0), (0.92, 1), (1.0, 2))        # cumulative: 0, 1 or 2 PPs per clause
ADJ_COUNT_FULL = ((0.58, 0), (0.90, 1), (1.0, 2))  # cumulative: adjectives in a full NP
ADJ_COUNT_SIMPLE = ((0.70, 0), (1.0, 1))           # cumulative: adjectives in a simple NP
MAX_SRC_LEN = 30         # source tokens, including the final "."

# Determiners: (cumulative probability, source word or None for "no determiner", target word)
DETS_SG = ((0.45, "the", "ta"), (0.70, "a", "en"), (0.80, "this", "sé"),
           (0.85, "every", "vaké"), (0.93, "my", "nim"), (1.0, "your", "tov"))
DETS_PL = ((0.35, "the", "ta"), (0.65, None, None), (0.75, "these", "sé"),
           (0.87, "some", "mun"), (0.94, "my", "nim"), (1.0, "your", "tov"))

# Function tokens of the target language.
T_PLURAL = "ka"      # after a plural NP
T_OBJECT = "ö"       # object-case particle after the object NP
T_REL = "ri"         # relative particle, between relative clause and its head
T_NEG = "mé"         # negation, right before the verb
T_AGREE = "ne"       # after the verb when its subject (or relative head) is plural
T_COMMA = ","        # after a fronted subordinate clause + conjunction
SRC_END = "."
TGT_END = "·"

# ----------------------------------------------------------------------------------------
# Lexicon.  Nouns: (singular, plural, target).  Target words with a space are two tokens.
NOUNS_ANIMATE = (
    ("cat", "cats", "miro"), ("dog", "dogs", "tavu"), ("bird", "birds", "pipé"),
    ("frog", "frogs", "kwaku"), ("horse", "horses", "ölmar"), ("mouse", "mice", "sitsi"),
    ("wolf", "wolves", "grauna"), ("bear", "bears", "übrö"), ("goat", "goats", "kazé"),
    ("duck", "ducks", "pulö"),
    ("farmer", "farmers", "tela rupa"), ("teacher", "teachers", "sévi rupa"),
    ("doctor", "doctors", "hémo rupa"), ("baker", "bakers", "brikö rupa"),
    ("sailor", "sailors", "ondé rupa"), ("merchant", "merchants", "kofa rupa"),
    ("fisherman", "fishermen", "ikri rupa"),
    ("child", "children", "nüta"), ("king", "kings", "zorak"), ("queen", "queens", "zoraké"),
    ("soldier", "soldiers", "gardö"), ("girl", "girls", "lénia"), ("boy", "boys", "bazu"),
    ("friend", "friends", "amöl"), ("neighbour", "neighbours", "kódi"),
    ("student", "students", "vinat"), ("thief", "thieves", "lurö"),
    ("guard", "guards", "ostiv"), ("poet", "poets", "rimé"), ("uncle", "uncles", "tadu"),
)
NOUNS_INANIMATE = (
    ("ball", "balls", "kuru"), ("book", "books", "tomsa"), ("box", "boxes", "kasü"),
    ("letter", "letters", "wérat"), ("cake", "cakes", "mölsi"), ("apple", "apples", "dolí"),
    ("loaf", "loaves", "kravo"), ("cup", "cups", "görü"), ("key", "keys", "nyaru"),
    ("lamp", "lamps", "sivra"), ("boat", "boats", "barök"), ("door", "doors", "quvé"),
    ("window", "windows", "okéra"), ("house", "houses", "kéza"),
    ("garden", "gardens", "vélan"), ("river", "rivers", "ésso"), ("tree", "trees", "yulo"),
    ("flower", "flowers", "bümé"), ("stone", "stones", "kalu"), ("road", "roads", "strö"),
    ("bridge", "bridges", "zanka"), ("hill", "hills", "töpa"),
    ("forest", "forests", "murké"), ("village", "villages", "pasti"),
    ("city", "cities", "mégal"), ("shop", "shops", "kramé"), ("school", "schools", "lérna"),
    ("kitchen", "kitchens", "fokö"), ("market", "markets", "agüra"),
    ("picture", "pictures", "zégra"), ("gift", "gifts", "tilu"), ("knife", "knives", "sekal"),
)
NOUNS_ALL = NOUNS_ANIMATE + NOUNS_INANIMATE

ADJECTIVES = (
    ("big", "groma"), ("small", "pitu"), ("old", "senu"), ("young", "tirö"),
    ("red", "rasé"), ("blue", "azü"), ("green", "loméa"), ("white", "sinté"),
    ("black", "möka"), ("happy", "ridé"), ("sad", "lüno"), ("quiet", "mutra"),
    ("tall", "hové"), ("short", "dimbu"), ("heavy", "pésik"), ("bright", "sünda"),
    ("dark", "vaxo"), ("clean", "pulé"), ("dirty", "grömi"), ("warm", "hézo"),
    ("cold", "kiltu"), ("new", "fréni"), ("strange", "özira"), ("clever", "tinké"),
    ("lazy", "dölu"), ("brave", "arök"),
)

# Verbs: (base form, 3rd person singular, target).  All transitive.
VERBS = (
    ("see", "sees", "ókal"), ("chase", "chases", "trupa"), ("find", "finds", "térvi"),
    ("carry", "carries", "bosto"), ("watch", "watches", "ménsi"),
    ("like", "likes", "hödi"), ("hear", "hears", "kanü"), ("paint", "paints", "maléo"),
    ("build", "builds", "ströka"), ("follow", "follows", "nakö"),
    ("help", "helps", "ayu dáru"), ("meet", "meets", "yéva"), ("call", "calls", "wohé"),
    ("wash", "washes", "plüsa"), ("feed", "feeds", "nyami"), ("catch", "catches", "grébi"),
    ("push", "pushes", "töki"), ("pull", "pulls", "vléko"), ("open", "opens", "kéfi"),
    ("visit", "visits", "hómi dáru"), ("read", "reads", "sirvé"),
    ("draw", "draws", "skizu"), ("buy", "buys", "pokü"), ("sell", "sells", "darvé"),
    ("cook", "cooks", "fírsa"), ("bring", "brings", "tawé"), ("hide", "hides", "sköli"),
    ("hold", "holds", "grapa"), ("greet", "greets", "éhlo"),
    ("teach", "teaches", "sévi dáru"),
)

PREPOSITIONS = (
    ("in", "nai"), ("on", "supa"), ("under", "téru"), ("near", "kozi"),
    ("behind", "urö"), ("with", "mita"), ("without", "sinda"), ("from", "dala"),
    ("across", "pöra"), ("beside", "lata"),
)

ADVERBS = (
    ("quickly", "hayé"), ("slowly", "lamba"), ("quietly", "shümi"),
    ("carefully", "taköla"), ("gladly", "felé"), ("again", "réna"), ("today", "oxi"),
    ("often", "müsa"),
)

# Conjunctions: (source, target, subordinating?)
CONJUNCTIONS = (
    ("and", "i", False), ("but", "ama", False), ("because", "zira", True),
    ("while", "dörö", True), ("although", "kalmé", True),
)


def check_lexicon():
    """Fail loudly if the lexicon maps two source words to the same target string (except the
    intended this/these -> sé), if a target token collides with a function token, or if a
    source word is used in two roles."""
    src_seen = {}
    tgt_seen = {}
    entries = []
    for sg, pl, t in NOUNS_ALL:
        entries += [("noun", sg, t), ("noun", pl, None)]
    entries += [("adj", s, t) for s, t in ADJECTIVES]
    for base, s3, t in VERBS:
        entries += [("verb", base, t), ("verb", s3, None)]
    entries += [("prep", s, t) for s, t in PREPOSITIONS]
    entries += [("adv", s, t) for s, t in ADVERBS]
    entries += [("conj", s, t) for s, t, _ in CONJUNCTIONS]
    for _, s, t in DETS_SG + DETS_PL:
        if s is not None and s not in ("the", "my", "your"):
            entries.append(("det", s, t))
    entries += [("det", "the", "ta"), ("det", "my", "nim"), ("det", "your", "tov")]
    entries += [("func", w, None) for w in ("an", "that", "does", "do", "not", SRC_END)]
    for role, s, t in entries:
        if s in src_seen:
            raise SystemExit("lexicon: source word %r used twice" % s)
        src_seen[s] = role
        if t is None:
            continue
        if t in tgt_seen and {s, tgt_seen[t]} != {"this", "these"}:
            raise SystemExit("lexicon: %r and %r both translate to %r" % (tgt_seen[t], s, t))
        tgt_seen[t] = s
    func = {T_PLURAL, T_OBJECT, T_REL, T_NEG, T_AGREE, T_COMMA, TGT_END}
    for t, s in sorted(tgt_seen.items()):
        for tok in t.split():
            if tok in func:
                raise SystemExit("lexicon: target of %r contains function token %r" % (s, tok))


# ----------------------------------------------------------------------------------------
# Generation.  Each generator returns (source tokens, target tokens[, extra]).

def pick(rng, seq):
    """Uniform choice using only rng.random()."""
    return seq[int(rng.random() * len(seq))]


def pick_cumulative(rng, table):
    """table: tuples whose first element is a cumulative probability (last one is 1.0)."""
    r = rng.random()
    for row in table:
        if r < row[0]:
            return row
    return table[-1]


def gen_np(rng, animate, full):
    """A noun phrase.  animate: the noun must be animate.  full: up to 2 adjectives and an
    optional relative clause (subject/object NPs); otherwise a simple NP (PP/relative)."""
    plural = rng.random() < P_PLURAL
    rel = full and rng.random() < P_REL
    _, det_s, det_t = pick_cumulative(rng, DETS_PL if plural else DETS_SG)
    n_adj = pick_cumulative(rng, ADJ_COUNT_FULL if full else ADJ_COUNT_SIMPLE)[1]
    adjs = []
    while len(adjs) < n_adj:
        a = pick(rng, ADJECTIVES)
        if a not in adjs:
            adjs.append(a)
    sg, pl, noun_t = pick(rng, NOUNS_ANIMATE if (animate or rel) else NOUNS_ALL)

    src = ([det_s] if det_s else []) + [a[0] for a in adjs] + [pl if plural else sg]
    tgt = ([det_t] if det_t else []) + noun_t.split()
    for a in reversed(adjs):
        tgt.append(a[1])
    if plural:
        tgt.append(T_PLURAL)

    if rel:
        base, s3, verb_t = pick(rng, VERBS)
        obj_s, obj_t, _ = gen_np(rng, animate=False, full=False)
        src = src + ["that", base if plural else s3] + obj_s
        tgt = obj_t + [T_OBJECT] + verb_t.split() + ([T_AGREE] if plural else []) + [T_REL] + tgt
    return src, tgt, plural


def gen_clause(rng):
    subj_s, subj_t, subj_pl = gen_np(rng, animate=True, full=True)
    neg = rng.random() < P_NEG
    base, s3, verb_t = pick(rng, VERBS)
    obj_s, obj_t, _ = gen_np(rng, animate=False, full=True)
    n_pp = pick_cumulative(rng, PP_COUNT)[1]
    pps = []
    used_preps = []
    while len(pps) < n_pp:
        prep = pick(rng, PREPOSITIONS)
        if prep in used_preps:
            continue
        used_preps.append(prep)
        np_s, np_t, _ = gen_np(rng, animate=False, full=False)
        pps.append(([prep[0]] + np_s, np_t + [prep[1]]))
    adv = pick(rng, ADVERBS) if rng.random() < P_ADV else None

    src = list(subj_s)
    if neg:
        src += ["do" if subj_pl else "does", "not", base]
    else:
        src.append(base if subj_pl else s3)
    src += obj_s
    for pp_s, _ in pps:
        src += pp_s
    if adv:
        src.append(adv[0])

    tgt = list(subj_t)
    for _, pp_t in reversed(pps):
        tgt += pp_t
    tgt += obj_t + [T_OBJECT]
    if adv:
        tgt.append(adv[1])
    if neg:
        tgt.append(T_NEG)
    tgt += verb_t.split()
    if subj_pl:
        tgt.append(T_AGREE)
    return src, tgt


def fix_articles(tokens):
    """English "a" becomes "an" before a vowel-initial word (same target word "en")."""
    return ["an" if (w == "a" and i + 1 < len(tokens) and tokens[i + 1][0] in "aeiou") else w
            for i, w in enumerate(tokens)]


def capitalise(tokens):
    tokens = list(tokens)
    tokens[0] = tokens[0][0].upper() + tokens[0][1:]
    return tokens


def gen_sentence(rng):
    """Draw sentences until one fits MAX_SRC_LEN; returns (source line, target line)."""
    while True:
        src, tgt = gen_clause(rng)
        if rng.random() < P_SECOND_CLAUSE:
            conj_s, conj_t, subordinating = pick(rng, CONJUNCTIONS)
            src2, tgt2 = gen_clause(rng)
            src = src + [conj_s] + src2
            if subordinating:
                tgt = tgt2 + [conj_t, T_COMMA] + tgt
            else:
                tgt = tgt + [conj_t] + tgt2
        src.append(SRC_END)
        tgt.append(TGT_END)
        if len(src) <= MAX_SRC_LEN:
            return " ".join(capitalise(fix_articles(src))), " ".join(capitalise(tgt))


def generate(seed, sizes):
    """sizes: list of (split name, count).  Returns {split: [(src, tgt), ...]}."""
    rng = random.Random(seed)
    seen = {}
    out = {}
    for name, count in sizes:
        pairs = []
        while len(pairs) < count:
            src, tgt = gen_sentence(rng)
            if src in seen:
                if seen[src] != tgt:  # cannot happen: the target is a function of the source
                    raise SystemExit("internal error: %r has two translations" % src)
                continue
            seen[src] = tgt
            pairs.append((src, tgt))
        out[name] = pairs
    return out


# ----------------------------------------------------------------------------------------
# Output.

def write_lines(path, lines):
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    with open(path, "wb") as f:
        f.write(data)
    return data


def length_stats(lines):
    lens = [len(line.split(" ")) for line in lines]
    return sum(lens) / len(lens), min(lens), max(lens)


def lexicon_table(title, rows):
    out = ["### " + title, "", "| source | target |", "|---|---|"]
    out += ["| %s | %s |" % (s, t) for s, t in rows]
    return out + [""]


def readme_text(command, sizes, data, checksums, file_bytes):
    L = []
    L += ["# Toy parallel corpus (artificial languages)", "",
          "Generated by `scripts/make_toy_corpus.py`; do not edit by hand.  Regenerate with",
          "(from the repository root):", "", "```", command, "```", "",
          "The output is byte-identical across runs and Python 3 versions (one",
          "`random.Random(seed)`, used only through `rng.random()`).", "",
          "## Files", "",
          "`{train,dev,test}.src` / `.tgt`: one sentence per line, UTF-8, `\\n` endings,",
          "tokens separated by single spaces (already tokenised; punctuation is a separate",
          "token).  Dev and test contain no sentence of train or of each other, and no split",
          "contains a duplicate.", "",
          "| split | pairs | src tokens avg / min / max | tgt tokens avg / min / max |",
          "|---|---|---|---|"]
    for name, _ in sizes:
        src = [p[0] for p in data[name]]
        tgt = [p[1] for p in data[name]]
        a, b = length_stats(src), length_stats(tgt)
        L.append("| %s | %d | %.2f / %d / %d | %.2f / %d / %d |"
                 % (name, len(src), a[0], a[1], a[2], b[0], b[1], b[2]))
    src_vocab = {}
    tgt_vocab = {}
    for name, _ in sizes:
        for s, t in data[name]:
            for w in s.split(" "):
                src_vocab[w] = 1
            for w in t.split(" "):
                tgt_vocab[w] = 1
    L += ["", "Vocabulary (distinct tokens over all splits, case-sensitive): source %d, "
          "target %d." % (len(src_vocab), len(tgt_vocab)), "",
          "| file | bytes | sha256 |", "|---|---|---|"]
    for fname in sorted(checksums):
        L.append("| %s | %d | `%s` |" % (fname, file_bytes[fname], checksums[fname]))
    L += ["", "## The languages", "",
          "Both languages are invented for this corpus.  The **source** is English-like with",
          "SVO order; the **target** (\"Veltic\") has invented words and head-final order, so",
          "translating needs long-distance reordering: attention alignments are far from",
          "diagonal and a plain encoder-decoder without attention has to memorise the whole",
          "sentence.  The target is a deterministic function of the source (no ambiguity).", "",
          "### Source grammar", "",
          "```",
          "SENT      -> CLAUSE [CONJ CLAUSE] .              (2nd clause: p=%.2f)" % P_SECOND_CLAUSE,
          "CLAUSE    -> NP_subj VERB NP_obj PP{0,2} [ADV]   (negated \"does/do not VERB\": p=%.2f,"
          % P_NEG,
          "                                                 adverb: p=%.2f)" % P_ADV,
          "NP        -> DET? ADJ{0,2} NOUN [that VERB NP_simple]   (relative clause: p=%.2f)"
          % P_REL,
          "NP_simple -> DET? ADJ{0,1} NOUN                  (inside PPs and relative clauses)",
          "PP        -> PREP NP_simple",
          "```", "",
          "- Subjects (and heads of relative clauses) are animate nouns; other NPs use any noun.",
          "- Nouns are plural with p=%.2f.  Singular determiners: the, a, this, every, my, your;"
          % P_PLURAL,
          "  plural: the, these, some, my, your, or none (bare plural).",
          "- Verbs agree with the subject (`sees` / `see`, `does not` / `do not`); the verb of",
          "  a relative clause agrees with its head.",
          "- PPs and adverbs always belong to the clause's main verb (relative clauses have",
          "  neither).  At most %d source tokens per sentence, including the final `.`."
          % MAX_SRC_LEN,
          "- *a* is written *an* before a vowel-initial word.",
          "- The first word is capitalised; the sentence ends with ` .`.", "",
          "### Translation rules", "",
          "1. Every source word has one target word (a few are two tokens, e.g. *teacher* ->",
          "   `sévi rupa`, *help* -> `ayu dáru`).  Singular and plural nouns share the target",
          "   noun; *this* and *these* are both `sé`, *a* and *an* both `en`; bare plurals",
          "   have no determiner.",
          "2. NP: `DET ADJ1 ADJ2 NOUN` -> `DET' NOUN' ADJ2' ADJ1' [ka]` (adjectives follow the",
          "   noun in mirror order; `ka` marks a plural NP).",
          "3. Relative clause: `NP that VERB NP_rel` -> `NP_rel' ö VERB' [ne] ri NP'` (the",
          "   relative clause precedes its head; `ne` marks a plural head).",
          "4. Clause: `SUBJ VERB OBJ PP1 PP2 ADV` -> `SUBJ' PP2' PP1' OBJ' ö ADV' [mé] VERB' [ne]`",
          "   with `PP' = NP' POSTPOSITION`: PPs become postpositional phrases placed in front",
          "   of the object in reverse order, the object takes the case particle `ö`, the",
          "   adverb and the negation `mé` come right before the clause-final verb, and `ne`",
          "   follows the verb when the subject is plural.",
          "5. Sentence: *and*, *but* keep clause order (`C1' CONJ' C2'`); *because*, *while*,",
          "   *although* front the subordinate clause (`C2' CONJ' , C1'`).",
          "6. The first target word is capitalised; the target ends with ` ·` (U+00B7).", "",
          "### Examples", ""]
    for s, t in data[sizes[0][0]][:5]:
        L += ["    " + s, "    " + t, ""]
    L += ["## Lexicon", ""]
    L += lexicon_table("Nouns (singular / plural)",
                       [("%s / %s" % (sg, pl), t) for sg, pl, t in NOUNS_ALL])
    L += lexicon_table("Adjectives", ADJECTIVES)
    L += lexicon_table("Verbs (base / 3sg)", [("%s / %s" % (b, s3), t) for b, s3, t in VERBS])
    L += lexicon_table("Prepositions -> postpositions", PREPOSITIONS)
    L += lexicon_table("Adverbs", ADVERBS)
    L += lexicon_table("Conjunctions", [(s, t + (" (subordinating)" if sub else ""))
                                       for s, t, sub in CONJUNCTIONS])
    dets = [("the", "ta"), ("a / an", "en"), ("this / these", "sé"), ("every", "vaké"),
            ("some", "mun"), ("my", "nim"), ("your", "tov")]
    L += lexicon_table("Determiners", dets)
    L += lexicon_table("Function tokens", [
        ("(plural NP)", T_PLURAL), ("(object case)", T_OBJECT), ("that (relative)", T_REL),
        ("does not / do not", T_NEG), ("(plural subject agreement)", T_AGREE),
        ("(after fronted subordinate clause)", T_COMMA), (SRC_END, TGT_END)])
    return "\n".join(L).rstrip("\n") + "\n"


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    default_out = os.path.join(root, "data", "toy")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", default=None,
                    help="output directory (default: <repo>/data/toy)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train", type=int, default=6000)
    ap.add_argument("--dev", type=int, default=500)
    ap.add_argument("--test", type=int, default=500)
    args = ap.parse_args()
    for name in ("train", "dev", "test"):
        if getattr(args, name) < 1:
            ap.error("--%s must be at least 1" % name)

    check_lexicon()
    out_dir = args.out_dir if args.out_dir is not None else default_out
    os.makedirs(out_dir, exist_ok=True)
    sizes = [("train", args.train), ("dev", args.dev), ("test", args.test)]
    data = generate(args.seed, sizes)

    checksums = {}
    file_bytes = {}
    for name, _ in sizes:
        for side, idx in (("src", 0), ("tgt", 1)):
            fname = "%s.%s" % (name, side)
            blob = write_lines(os.path.join(out_dir, fname), [p[idx] for p in data[name]])
            checksums[fname] = hashlib.sha256(blob).hexdigest()
            file_bytes[fname] = len(blob)

    command = "python3 scripts/make_toy_corpus.py"
    if args.out_dir is not None:
        command += " --out-dir " + args.out_dir
    command += " --seed %d --train %d --dev %d --test %d" % (args.seed, args.train, args.dev,
                                                            args.test)
    readme = readme_text(command, sizes, data, checksums, file_bytes)
    write_lines(os.path.join(out_dir, "README.md"), readme.rstrip("\n").split("\n"))

    for name, _ in sizes:
        s = length_stats([p[0] for p in data[name]])
        t = length_stats([p[1] for p in data[name]])
        print("%-5s %5d pairs  src len avg %.2f min %d max %d  tgt len avg %.2f min %d max %d"
              % (name, len(data[name]), s[0], s[1], s[2], t[0], t[1], t[2]))
    print("total bytes: %d  ->  %s" % (sum(file_bytes.values()), out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
