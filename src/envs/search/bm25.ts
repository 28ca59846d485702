// Okapi BM25 over a fixed list of documents: the retrieval behind the search env's `search` tool.
// Small and exact rather than clever: the corpus is a few hundred documents, so an inverted index
// over lowercase alphanumeric terms and a full scoring pass per query is plenty. Ties break by
// document order so results are deterministic.

export function terms(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

export interface Hit {
  index: number;
  score: number;
}

export class Bm25Index {
  private readonly postings = new Map<string, Array<[doc: number, count: number]>>();
  private readonly lengths: number[];
  private readonly averageLength: number;

  constructor(
    documents: string[],
    private readonly k1 = 1.2,
    private readonly b = 0.75,
  ) {
    this.lengths = documents.map((document, index) => {
      const counts = new Map<string, number>();
      const words = terms(document);
      for (const word of words) counts.set(word, (counts.get(word) ?? 0) + 1);
      for (const [word, count] of counts) {
        const list = this.postings.get(word) ?? [];
        list.push([index, count]);
        this.postings.set(word, list);
      }
      return words.length;
    });
    this.averageLength = this.lengths.reduce((a, b) => a + b, 0) / Math.max(1, documents.length);
  }

  /** The `k` best documents for `query` with a positive score, best first. */
  search(query: string, k: number): Hit[] {
    const n = this.lengths.length;
    const scores = new Map<number, number>();
    for (const word of new Set(terms(query))) {
      const list = this.postings.get(word);
      if (!list) continue;
      const idf = Math.log(1 + (n - list.length + 0.5) / (list.length + 0.5));
      for (const [doc, count] of list) {
        const norm = this.k1 * (1 - this.b + (this.b * this.lengths[doc]!) / this.averageLength);
        scores.set(doc, (scores.get(doc) ?? 0) + (idf * count * (this.k1 + 1)) / (count + norm));
      }
    }
    return [...scores]
      .map(([index, score]) => ({ index, score }))
      .sort((x, y) => y.score - x.score || x.index - y.index)
      .slice(0, k);
  }
}
