/**
 * A binary min-heap of symbol pairs ordered by (priority, left index), the
 * work queue of the SPM and BPE merge loops. Stale entries are left in and
 * skipped by the caller, as in llama.cpp.
 *
 * @module
 */
export class PairHeap {
  #priority = new Float64Array(64);
  #left = new Int32Array(64);
  #right = new Int32Array(64);
  #size = new Int32Array(64);
  length = 0;

  clear(): void {
    this.length = 0;
  }

  #less(i: number, j: number): boolean {
    const a = this.#priority[i], b = this.#priority[j];
    return a < b || (a === b && this.#left[i] < this.#left[j]);
  }

  #swap(i: number, j: number): void {
    const p = this.#priority[i], l = this.#left[i], r = this.#right[i], s = this.#size[i];
    this.#priority[i] = this.#priority[j];
    this.#left[i] = this.#left[j];
    this.#right[i] = this.#right[j];
    this.#size[i] = this.#size[j];
    this.#priority[j] = p;
    this.#left[j] = l;
    this.#right[j] = r;
    this.#size[j] = s;
  }

  #grow(): void {
    const cap = this.#priority.length * 2;
    const p = new Float64Array(cap), l = new Int32Array(cap);
    const r = new Int32Array(cap), s = new Int32Array(cap);
    p.set(this.#priority);
    l.set(this.#left);
    r.set(this.#right);
    s.set(this.#size);
    this.#priority = p;
    this.#left = l;
    this.#right = r;
    this.#size = s;
  }

  push(priority: number, left: number, right: number, size: number): void {
    if (this.length === this.#priority.length) this.#grow();
    let i = this.length++;
    this.#priority[i] = priority;
    this.#left[i] = left;
    this.#right[i] = right;
    this.#size[i] = size;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#less(i, parent)) break;
      this.#swap(i, parent);
      i = parent;
    }
  }

  /** Removes the top; its fields are then `topPriority`, `topLeft`, `topRight`, `topSize`. */
  pop(): void {
    this.topPriority = this.#priority[0];
    this.topLeft = this.#left[0];
    this.topRight = this.#right[0];
    this.topSize = this.#size[0];
    const last = --this.length;
    if (last > 0) {
      this.#priority[0] = this.#priority[last];
      this.#left[0] = this.#left[last];
      this.#right[0] = this.#right[last];
      this.#size[0] = this.#size[last];
      let i = 0;
      for (;;) {
        const a = 2 * i + 1, b = a + 1;
        let m = i;
        if (a < last && this.#less(a, m)) m = a;
        if (b < last && this.#less(b, m)) m = b;
        if (m === i) break;
        this.#swap(i, m);
        i = m;
      }
    }
  }

  topPriority = 0;
  topLeft = 0;
  topRight = 0;
  topSize = 0;
}
