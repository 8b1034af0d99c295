/**
 * A binary min-heap of symbol pairs ordered by (priority, left index), the
 * work queue of the SPM and BPE merge loops. Stale entries are left in and
 * skipped by the caller, as in llama.cpp. Entries live in parallel typed
 * arrays; `add` + `heapify` build the first queue in linear time.
 *
 * @module
 */
export class PairHeap {
  #priority = new Float64Array(64);
  #left = new Int32Array(64);
  #right = new Int32Array(64);
  #size = new Int32Array(64);
  length = 0;
  topPriority = 0;
  topLeft = 0;
  topRight = 0;
  topSize = 0;

  clear(): void {
    this.length = 0;
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

  /** Appends without ordering; call `heapify` before `pop`. */
  add(priority: number, left: number, right: number, size: number): void {
    if (this.length === this.#priority.length) this.#grow();
    const i = this.length++;
    this.#priority[i] = priority;
    this.#left[i] = left;
    this.#right[i] = right;
    this.#size[i] = size;
  }

  /** Orders everything added so far (Floyd's bottom-up build). */
  heapify(): void {
    for (let i = (this.length >> 1) - 1; i >= 0; i--) this.#siftDown(i);
  }

  /** Adds one entry in heap order. */
  push(priority: number, left: number, right: number, size: number): void {
    this.add(priority, left, right, size);
    const p = this.#priority, l = this.#left, r = this.#right, s = this.#size;
    let i = this.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const pp = p[parent];
      if (pp < priority || (pp === priority && l[parent] <= left)) break;
      p[i] = pp;
      l[i] = l[parent];
      r[i] = r[parent];
      s[i] = s[parent];
      i = parent;
    }
    p[i] = priority;
    l[i] = left;
    r[i] = right;
    s[i] = size;
  }

  /** Removes the top; its fields are then `topPriority`, `topLeft`, `topRight`, `topSize`. */
  pop(): void {
    const p = this.#priority, l = this.#left, r = this.#right, s = this.#size;
    this.topPriority = p[0];
    this.topLeft = l[0];
    this.topRight = r[0];
    this.topSize = s[0];
    const last = --this.length;
    if (last > 0) {
      p[0] = p[last];
      l[0] = l[last];
      r[0] = r[last];
      s[0] = s[last];
      this.#siftDown(0);
    }
  }

  #siftDown(start: number): void {
    const p = this.#priority, l = this.#left, r = this.#right, s = this.#size;
    const n = this.length;
    const priority = p[start], left = l[start], right = r[start], size = s[start];
    let i = start;
    for (;;) {
      let c = 2 * i + 1;
      if (c >= n) break;
      const d = c + 1;
      if (d < n && (p[d] < p[c] || (p[d] === p[c] && l[d] < l[c]))) c = d;
      if (priority < p[c] || (priority === p[c] && left <= l[c])) break;
      p[i] = p[c];
      l[i] = l[c];
      r[i] = r[c];
      s[i] = s[c];
      i = c;
    }
    p[i] = priority;
    l[i] = left;
    r[i] = right;
    s[i] = size;
  }
}
