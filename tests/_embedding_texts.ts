/** The texts of the embedding goldens: several languages and lengths. @module */

/** 12 inputs: English, French, German, Spanish, Chinese, Japanese, Russian, Arabic, code, numbers, one word, a long paragraph. */
export const EMBEDDING_TEXTS: readonly string[] = [
  "The quick brown fox jumps over the lazy dog.",
  "Le chat dort sur le canapé pendant que la pluie tombe doucement.",
  "Die Bibliothek öffnet morgen um neun Uhr, aber nur für Studierende.",
  "¿Dónde está la estación de tren más cercana?",
  "机器学习是人工智能的一个分支，它让计算机从数据中学习。",
  "東京の桜は三月の終わりから四月の初めにかけて咲きます。",
  "Москва — столица России и крупнейший город страны.",
  "القراءة غذاء العقل والروح.",
  "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)",
  "In 2024, 3.14159 × 2 = 6.28318; 100% of 42 is 42.",
  "embeddings",
  "Retrieval-augmented generation combines a search step with a language model: the question " +
  "is embedded as a vector, the nearest passages of a document collection are found by cosine " +
  "similarity, and those passages are given to the model together with the question, so that " +
  "the answer can cite facts the model never saw during training. The quality of the whole " +
  "system depends on the embedding model: two texts that mean the same thing should land close " +
  "together, even when they share few words, while texts about different subjects should land " +
  "far apart. Small sentence-transformer models such as all-MiniLM-L6-v2 are popular for this " +
  "because they are fast on a CPU and good enough for many collections of English text.",
];

/** Queries of the retrieval check: each should rank the documents above as sentence-transformers does. */
export const RETRIEVAL_QUERIES: readonly string[] = [
  "Where can I catch a train?",
  "How do computers learn from examples?",
  "When do cherry blossoms bloom in Japan?",
  "a recursive function in Python",
  "What is the capital of Russia?",
];
