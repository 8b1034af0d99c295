// Generates schemas_corpus.json: small, varied JSON Schemas (draft 2020-12) that llama.cpp's
// json-schema-to-grammar (2026-10) accepts and whose every grammar-conforming output is valid
// for ajv. Deterministic (seeded PRNG); run from the repository root:
//
//   deno run --allow-write=tests/golden/grammar tests/golden/grammar/make_corpus.ts
//
// Rules kept so that "output matches llama.cpp's grammar" implies "output validates":
// - no numeric bounds on "number" (llama.cpp ignores them; bounds only on "integer");
// - no minLength/maxLength next to pattern/format (llama.cpp ignores them there);
// - patterns are anchored and use only explicit, JSON-safe character classes (no ".", no
//   negated classes: llama.cpp puts the pattern's characters raw inside the JSON string);
// - formats only date, time, date-time, uuid (the ones the converter turns into rules);
// - oneOf alternatives are mutually exclusive (llama.cpp treats oneOf as anyOf);
// - allOf only of objects with disjoint properties and no additionalProperties (llama.cpp
//   merges them and makes every property required);
// - no `required` naming an undeclared property, no $ref with sibling keywords, no uniqueItems,
//   multipleOf, minProperties, not, if/then/else (all silently ignored by llama.cpp).

type Schema = Record<string, unknown>;
interface Case {
  name: string;
  schema: Schema;
  // llama.cpp grammar behaviours that can make a grammatical output fail JSON.parse + ajv
  // (see README.md, "Caveats"); absent when there are none
  caveats?: string[];
}

let seed = 0x5eed1234;
function rand(): number {
  // mulberry32
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)];
const int = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));

// Leaf schemas: [short tag, schema]
const LEAVES: [string, Schema][] = [
  ["str", { type: "string" }],
  ["str-len1-8", { type: "string", minLength: 1, maxLength: 8 }],
  ["str-max3", { type: "string", maxLength: 3 }],
  ["str-len2", { type: "string", minLength: 2, maxLength: 2 }],
  ["str-len3-20", { type: "string", minLength: 3, maxLength: 20 }],
  ["pat-code", { type: "string", pattern: "^[A-Z]{3}-[0-9]{2}$" }],
  ["pat-word", { type: "string", pattern: "^[a-z]{1,10}$" }],
  ["pat-color", { type: "string", pattern: "^(red|green|blue)$" }],
  ["pat-phone", { type: "string", pattern: "^[0-9]{3}-[0-9]{4}$" }],
  ["pat-hex", { type: "string", pattern: "^#[0-9a-fA-F]{6}$" }],
  ["pat-semver", { type: "string", pattern: "^v[0-9]{1,2}\\.[0-9]{1,2}\\.[0-9]{1,2}$" }],
  ["pat-name", { type: "string", pattern: "^[A-Z][a-z]{0,9}( [A-Z][a-z]{0,9})?$" }],
  ["pat-opt", { type: "string", pattern: "^(ab)?c{1,3}d?$" }],
  ["fmt-date", { type: "string", format: "date" }],
  ["fmt-time", { type: "string", format: "time" }],
  ["fmt-datetime", { type: "string", format: "date-time" }],
  ["fmt-uuid", { type: "string", format: "uuid" }],
  ["int", { type: "integer" }],
  ["int-0-100", { type: "integer", minimum: 0, maximum: 100 }],
  ["int-m10-10", { type: "integer", minimum: -10, maximum: 10 }],
  ["int-xmin0-max9", { type: "integer", exclusiveMinimum: 0, maximum: 9 }],
  ["int-min1", { type: "integer", minimum: 1 }],
  ["int-max-1", { type: "integer", maximum: -1 }],
  ["int-year", { type: "integer", minimum: 1900, maximum: 2100 }],
  ["int-xmax50", { type: "integer", minimum: 0, exclusiveMaximum: 50 }],
  ["num", { type: "number" }],
  ["bool", { type: "boolean" }],
  ["null", { type: "null" }],
  ["enum-str", { enum: ["small", "medium", "large"] }],
  ["enum-int", { enum: [1, 2, 3, 5, 8] }],
  ["enum-mixed", { enum: ["x", 1, true, null] }],
  ["str-enum", { type: "string", enum: ["north", "south", "east", "west"] }],
  ["const-str", { const: "fixed" }],
  ["const-int", { const: 42 }],
  ["const-obj", { const: { a: 1, b: [true, null] } }],
  ["str-or-null", { type: ["string", "null"] }],
  ["int-or-bool", { type: ["integer", "boolean"] }],
  ["arr-int", { type: "array", items: { type: "integer" }, maxItems: 4 }],
  ["arr-str-1-3", {
    type: "array",
    items: { type: "string", maxLength: 10 },
    minItems: 1,
    maxItems: 3,
  }],
];

// Leaves also safe at the root (everything above is; "any" forms added here).
const ROOT_ONLY: [string, Schema][] = [
  ["any", {}],
  ["any-object", { type: "object" }],
  ["any-array", { type: "array", maxItems: 3 }],
  ["obj-empty-closed", { type: "object", properties: {}, additionalProperties: false }],
];

const PROP_NAMES = [
  "id",
  "name",
  "title",
  "count",
  "price",
  "tags",
  "active",
  "kind",
  "code",
  "note",
  "when",
  "size",
  "owner",
  "score",
  "level",
  "color",
];

function shuffled<T>(xs: readonly T[]): T[] {
  const a = [...xs];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

type AddProps = "absent" | "false" | "true" | "schema";

function object(
  depth: number,
  opts: { nProps?: number; addProps?: AddProps; requiredAll?: boolean } = {},
): Schema {
  const n = opts.nProps ?? int(1, 4);
  const names = shuffled(PROP_NAMES).slice(0, n);
  const properties: Record<string, Schema> = {};
  for (const name of names) {
    properties[name] = depth > 1 && rand() < 0.45 ? nested(depth - 1) : pick(LEAVES)[1];
  }
  const s: Schema = { type: "object", properties };
  const required = opts.requiredAll ? names : names.filter(() => rand() < 0.6);
  if (required.length > 0) s.required = required;
  const ap = opts.addProps ?? pick<AddProps>(["absent", "false", "false", "true", "schema"]);
  if (ap === "false") s.additionalProperties = false;
  if (ap === "true") s.additionalProperties = true;
  if (ap === "schema") {
    s.additionalProperties = pick(LEAVES.filter(([t]) => t.startsWith("int") || t === "bool"))[1];
  }
  return s;
}

function nested(depth: number): Schema {
  const r = rand();
  if (r < 0.55) return object(depth, { nProps: int(1, 3) });
  if (r < 0.8) {
    const min = int(0, 2);
    return {
      type: "array",
      items: object(depth, { nProps: int(1, 2), addProps: "false" }),
      minItems: min,
      maxItems: Math.min(4, min + int(0, 2)),
    };
  }
  return { anyOf: [object(depth, { nProps: int(1, 2) }), { type: "null" }] };
}

const cases: Case[] = [];
const add = (name: string, schema: Schema) => cases.push({ name, schema });

// 1. every leaf at the root (44)
for (const [tag, s] of [...LEAVES, ...ROOT_ONLY]) add(`leaf-${tag}`, s);

// 2. flat objects, every additionalProperties form (24)
for (let i = 0; i < 24; i++) {
  const ap = (["absent", "false", "true", "schema"] as const)[i % 4];
  add(`object-flat-${i}-ap-${ap}`, object(1, { addProps: ap, requiredAll: i % 3 === 0 }));
}

// 3. nested objects, depth 2..4 (18)
for (let i = 0; i < 18; i++) {
  const depth = 2 + (i % 3);
  add(`object-nested-d${depth}-${i}`, object(depth, { nProps: int(2, 3) }));
}

// 4. arrays (14)
for (let i = 0; i < 8; i++) {
  const [tag, item] = pick(LEAVES);
  const min = int(0, 2);
  const max = Math.min(4, min + int(0, 2));
  add(`array-${tag}-${min}-${max}`, { type: "array", items: item, minItems: min, maxItems: max });
}
for (let i = 0; i < 4; i++) {
  const items = [pick(LEAVES)[1], pick(LEAVES)[1], ...(i % 2 ? [pick(LEAVES)[1]] : [])];
  add(`tuple-${i}`, {
    type: "array",
    prefixItems: items,
    minItems: items.length,
    maxItems: items.length,
  });
}
add("array-of-objects", {
  type: "array",
  items: object(2, { nProps: 2 }),
  minItems: 1,
  maxItems: 3,
});
add("array-of-arrays", {
  type: "array",
  items: { type: "array", items: { type: "integer", minimum: 0, maximum: 9 }, maxItems: 3 },
  maxItems: 3,
});

// 5. composition (16)
add("anyOf-str-int", { anyOf: [{ type: "string", maxLength: 10 }, { type: "integer" }] });
add("anyOf-objects", {
  anyOf: [object(1, { nProps: 2, addProps: "false" }), object(1, { nProps: 2, addProps: "false" })],
});
add("anyOf-in-prop", {
  type: "object",
  properties: {
    value: { anyOf: [{ type: "number" }, { type: "string", maxLength: 8 }, { type: "null" }] },
  },
  required: ["value"],
  additionalProperties: false,
});
add("oneOf-types", {
  oneOf: [{ type: "boolean" }, { type: "integer", minimum: 0, maximum: 9 }, { type: "null" }],
});
add("oneOf-consts", { oneOf: [{ const: "on" }, { const: "off" }, { const: 0 }] });
add("oneOf-tagged", {
  oneOf: [
    {
      type: "object",
      properties: { kind: { const: "circle" }, r: { type: "integer", minimum: 1, maximum: 9 } },
      required: ["kind", "r"],
      additionalProperties: false,
    },
    {
      type: "object",
      properties: { kind: { const: "square" }, side: { type: "integer", minimum: 1, maximum: 9 } },
      required: ["kind", "side"],
      additionalProperties: false,
    },
  ],
});
add("allOf-two-objects", {
  allOf: [
    { type: "object", properties: { id: { type: "integer" } }, required: ["id"] },
    {
      type: "object",
      properties: { label: { type: "string", maxLength: 12 } },
      required: ["label"],
    },
  ],
});
add("allOf-three-objects", {
  allOf: [
    { type: "object", properties: { a: { type: "boolean" } }, required: ["a"] },
    { type: "object", properties: { b: { enum: ["x", "y"] } }, required: ["b"] },
    { type: "object", properties: { c: { type: "null" } }, required: ["c"] },
  ],
});
add("allOf-enums", { allOf: [{ enum: ["a", "b", "c", "d"] }, { enum: ["b", "c", "e"] }] });
add("allOf-ref", {
  $defs: {
    base: { type: "object", properties: { id: { type: "integer", minimum: 1 } }, required: ["id"] },
  },
  allOf: [{ $ref: "#/$defs/base" }, {
    type: "object",
    properties: { ok: { type: "boolean" } },
    required: ["ok"],
  }],
});
add("type-array-three", { type: ["integer", "string", "null"] });
add("type-array-object-null", {
  type: ["object", "null"],
  properties: { x: { type: "integer" } },
  required: ["x"],
  additionalProperties: false,
});
add("nullable-props", {
  type: "object",
  properties: {
    a: { type: ["string", "null"], maxLength: 5 },
    b: { anyOf: [{ type: "integer" }, { type: "null" }] },
  },
  required: ["a", "b"],
  additionalProperties: false,
});
add("anyOf-arrays", {
  anyOf: [{ type: "array", items: { type: "integer" }, maxItems: 2 }, {
    type: "array",
    items: { type: "boolean" },
    minItems: 3,
    maxItems: 3,
  }],
});
add("anyOf-nested-3", {
  type: "object",
  properties: {
    v: { anyOf: [{ anyOf: [{ type: "integer" }, { type: "boolean" }] }, { const: "none" }] },
  },
  required: ["v"],
  additionalProperties: false,
});
add("oneOf-in-array", {
  type: "array",
  items: { oneOf: [{ type: "string", maxLength: 5 }, { type: "integer" }] },
  maxItems: 4,
});

// 6. $defs / $ref, recursion (10)
add("ref-simple", {
  $defs: { name: { type: "string", minLength: 1, maxLength: 12 } },
  type: "object",
  properties: { first: { $ref: "#/$defs/name" }, last: { $ref: "#/$defs/name" } },
  required: ["first", "last"],
  additionalProperties: false,
});
add("ref-root", {
  $defs: {
    point: {
      type: "object",
      properties: { x: { type: "integer" }, y: { type: "integer" } },
      required: ["x", "y"],
      additionalProperties: false,
    },
  },
  $ref: "#/$defs/point",
});
add("ref-chain", {
  $defs: {
    a: { $ref: "#/$defs/b" },
    b: { type: "array", items: { $ref: "#/$defs/c" }, maxItems: 3 },
    c: { enum: ["p", "q"] },
  },
  $ref: "#/$defs/a",
});
add("ref-in-array", {
  $defs: {
    item: {
      type: "object",
      properties: {
        sku: { type: "string", pattern: "^[A-Z]{2}[0-9]{3}$" },
        qty: { type: "integer", minimum: 1, maximum: 99 },
      },
      required: ["sku", "qty"],
      additionalProperties: false,
    },
  },
  type: "object",
  properties: {
    items: { type: "array", items: { $ref: "#/$defs/item" }, minItems: 1, maxItems: 3 },
  },
  required: ["items"],
  additionalProperties: false,
});
add("ref-tree", {
  $defs: {
    node: {
      type: "object",
      properties: {
        value: { type: "integer" },
        children: { type: "array", items: { $ref: "#/$defs/node" }, maxItems: 2 },
      },
      required: ["value"],
      additionalProperties: false,
    },
  },
  $ref: "#/$defs/node",
});
add("ref-linked-list", {
  $defs: {
    cell: {
      type: "object",
      properties: {
        head: { type: "integer", minimum: 0, maximum: 9 },
        tail: { anyOf: [{ $ref: "#/$defs/cell" }, { type: "null" }] },
      },
      required: ["head", "tail"],
      additionalProperties: false,
    },
  },
  $ref: "#/$defs/cell",
});
add("ref-expr", {
  $defs: {
    expr: {
      anyOf: [{ type: "integer", minimum: 0, maximum: 99 }, {
        type: "object",
        properties: {
          op: { enum: ["+", "*"] },
          args: { type: "array", items: { $ref: "#/$defs/expr" }, minItems: 2, maxItems: 2 },
        },
        required: ["op", "args"],
        additionalProperties: false,
      }],
    },
  },
  $ref: "#/$defs/expr",
});
add("ref-shared-twice", {
  $defs: { date: { type: "string", format: "date" } },
  type: "object",
  properties: { start: { $ref: "#/$defs/date" }, end: { $ref: "#/$defs/date" } },
  required: ["start"],
  additionalProperties: false,
});
add("ref-properties-path", {
  type: "object",
  properties: { a: { type: "integer", minimum: 0, maximum: 5 }, b: { $ref: "#/properties/a" } },
  required: ["a", "b"],
  additionalProperties: false,
});
add("ref-nested-defs", {
  $defs: {
    person: {
      type: "object",
      properties: { name: { type: "string", maxLength: 15 }, address: { $ref: "#/$defs/address" } },
      required: ["name"],
      additionalProperties: false,
    },
    address: {
      type: "object",
      properties: {
        city: { type: "string", maxLength: 15 },
        zip: { type: "string", pattern: "^[0-9]{5}$" },
      },
      required: ["city"],
      additionalProperties: false,
    },
  },
  $ref: "#/$defs/person",
});

// 7. seeded mixtures: objects with arrays/enums/consts and optional properties (remaining)
for (let i = 0; cases.length < 130; i++) {
  const depth = int(1, 4);
  add(`mixed-d${depth}-${i}`, object(depth, { nProps: int(1, 4) }));
}

// 8. four objects deep, on purpose (the seeded ones rarely reach depth 4) (4)
const closed = (
  properties: Record<string, Schema>,
  required = Object.keys(properties),
): Schema => ({
  type: "object",
  properties,
  required,
  additionalProperties: false,
});
add(
  "deep-object-4",
  closed({
    a: closed({ b: closed({ c: closed({ d: { type: "integer", minimum: 0, maximum: 9 } }) }) }),
  }),
);
add(
  "deep-array-object-4",
  closed({
    groups: {
      type: "array",
      maxItems: 2,
      items: closed({
        name: { type: "string", maxLength: 8 },
        members: {
          type: "array",
          maxItems: 2,
          items: closed({
            id: { type: "integer", minimum: 1, maximum: 99 },
            meta: closed({ ok: { type: "boolean" } }),
          }),
        },
      }),
    },
  }),
);
add(
  "deep-optional-4",
  closed({
    x: closed({
      y: { anyOf: [closed({ z: closed({ w: { enum: ["p", "q"] } }, []) }, []), { type: "null" }] },
      n: { type: "integer", minimum: 0, maximum: 3 },
    }, ["n"]),
  }, []),
);
add("deep-ref-4", {
  $defs: {
    l1: closed({ l2: { $ref: "#/$defs/l2" } }),
    l2: closed({ l3: { $ref: "#/$defs/l3" } }),
    l3: closed({ l4: { $ref: "#/$defs/l4" } }),
    l4: closed({ v: { type: "string", pattern: "^[a-z]{1,4}$" } }),
  },
  $ref: "#/$defs/l1",
});

// Caveats: where llama.cpp's grammar admits text that JSON.parse + ajv (strict) reject.
function caveats(schema: Schema): string[] {
  const found = new Set<string>();
  const walk = (x: unknown) => {
    if (Array.isArray(x)) return x.forEach(walk);
    if (x === null || typeof x !== "object") return;
    const n = x as Schema;
    const types = Array.isArray(n.type) ? n.type : [n.type];
    const hasProps = n.properties !== undefined && Object.keys(n.properties as object).length > 0;
    const anyValue = Object.keys(n).length === 0 || n.additionalProperties === true ||
      (n.type === "object" && n.properties === undefined && n.additionalProperties === undefined) ||
      (n.type === "array" && n.items === undefined && n.prefixItems === undefined);
    // number: exponent up to 16 digits, JSON.parse gives +-Infinity, ajv's strictNumbers rejects it
    if (types.includes("number") || anyValue) found.add("number-overflow");
    // extra keys next to declared ones: llama.cpp's not-strings key rule starts with a negated class
    // ([^"...]) that admits raw control characters and a lone backslash -> invalid JSON
    const extra = n.additionalProperties !== undefined && n.additionalProperties !== false;
    if (extra && hasProps) found.add("additional-key-raw-chars");
    // date: any month may have day 29..31, e.g. 2023-02-30, which ajv-formats rejects
    if (n.format === "date" || n.format === "date-time") found.add("date-calendar");
    Object.entries(n).forEach(([k, v]) => k !== "const" && k !== "enum" && walk(v));
  };
  walk(schema);
  return [...found].sort();
}
// 9. more seeded closed objects without caveats, until >= 112 schemas have none
for (let i = 0; cases.filter((c) => caveats(c.schema).length === 0).length < 112; i++) {
  const depth = int(1, 4);
  const s = object(depth, { nProps: int(1, 4), addProps: "false" });
  if (caveats(s).length === 0) add(`closed-d${depth}-${i}`, s);
}

for (const c of cases) {
  const cv = caveats(c.schema);
  if (cv.length > 0) c.caveats = cv;
}

const names = new Set<string>();
for (const c of cases) {
  if (names.has(c.name)) throw new Error(`duplicate name ${c.name}`);
  names.add(c.name);
}
const out = new URL("./schemas_corpus.json", import.meta.url);
await Deno.writeTextFile(out, JSON.stringify(cases, null, 2) + "\n");
console.log(`${cases.length} schemas -> ${out.pathname}`);
