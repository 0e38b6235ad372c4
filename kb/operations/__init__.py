"""Operations that open a knowledge base: runner keys (keygen, trust, revoke, signing) and partner records (add, remove). They sit above the `KnowledgeBase` front door."""
