"""A token as OpenAI's completions API names it, in `tokens` and as a key of `top_logprobs`: its text, or,
where its bytes are not whole UTF-8 (part of a character split across tokens), `bytes:\\xNN...`.

GPT-2's byte-level BPE works on bytes, not characters: each token stands for a string of bytes, written in
its vocabulary one character per byte (GPT-2's `bytes_to_unicode`: a printable byte as itself, the others
as the characters from U+0100 on). A token whose bytes end inside a character, or begin in its middle,
decodes to U+FFFD alone, as does every other such token: keyed by that text, a logprobs dict would keep
only one of them. Keyed by bytes, no two tokens of a vocabulary share a key.
"""

from __future__ import annotations

# The bytes GPT-2's vocabulary writes as themselves: "!" to "~", "¡" to "¬", "®" to "ÿ".
_PRINTABLE = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
# Each character of a vocabulary entry -> the byte it stands for; the other bytes in order from U+0100.
BYTE_OF = {chr(b): b for b in _PRINTABLE} | {chr(256 + n): b for n, b in
                                             enumerate(b for b in range(256) if b not in _PRINTABLE)}


def token_bytes(tokenizer, token_id: int) -> bytes | None:
    """The bytes token `token_id` stands for in `tokenizer` (a transformers GPT-2 tokenizer): its vocabulary
    entry, a byte per character; an added token's (<|endoftext|>) text in UTF-8. None for an id the
    tokenizer has no entry for (a stand-in's tokenizer knows fewer ids than its model's vocabulary)."""
    token = tokenizer.convert_ids_to_tokens(token_id)
    if token is None:
        return None
    if token_id in tokenizer.added_tokens_decoder:
        return token.encode("utf-8")
    return bytes(BYTE_OF[c] for c in token)


def token_key(tokenizer, token_id: int) -> str:
    """Token `token_id`'s key: its bytes decoded, when they are whole UTF-8; else `bytes:` and each byte as
    \\x and two lowercase hex digits (OpenAI's API writes a split character's parts so); an id without an
    entry, `<|token N|>` (its text is empty, as that of every other such id)."""
    raw = token_bytes(tokenizer, token_id)
    if raw is None:
        return f"<|token {token_id}|>"
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes:" + "".join(f"\\x{b:02x}" for b in raw)
