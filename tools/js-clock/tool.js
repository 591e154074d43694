// js_clock: a vak tool written in JavaScript, built with `jco componentize` (QuickJS by default,
// or StarlingMonkey: see README.md). It imports one capability, `vak:tool/clock@0.2.1`, and
// exports `vak:tool/tool@0.2.1` (`describe` and `call`).
//
// Binding conventions (as jco generates them for this world, under either engine):
//   * WIT kebab-case record fields are camelCase here (input-schema -> inputSchema).
//   * option<T>: `undefined` (or null) is none.  enum: its case name as a string ("observed").
//   * s64/u64: a Number under QuickJS, a BigInt under StarlingMonkey (so reading.unixSeconds
//     goes through Number() below, and a budget is written as a Number).
//   * An imported `result<T, E>`: ok is returned, err is thrown as a ComponentError whose
//     `.payload` is E (here a variant `{ tag: "denied" | "revoked" | "invalid" | "failed", val }`).
//   * An exported `result<T, E>`: the return value is ok; a thrown object with an own `payload`
//     property is err(payload). A thrown Error without `payload` is re-thrown: the call traps.
import { now } from "vak:tool/clock@0.2.1";

const NAME = "js_clock";
const PAYLOAD_SCHEMA = "vak.temporal.instant/1";

// JSON Schema of the arguments object; the host enforces it before `call` runs.
const INPUT_SCHEMA = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  title: "Args",
  type: "object",
  properties: {
    zone: {
      type: "string",
      description: "IANA time zone to read the clock in, e.g. `UTC`. There is no default.",
    },
  },
  required: ["zone"],
  additionalProperties: false,
};

// The error `call` throws for a refusal: its own `payload` makes it `err(tool-error)`.
function toolError(code, message) {
  return Object.assign(new Error(message), { payload: { code, message } });
}

export const tool = {
  describe() {
    return {
      name: NAME,
      description:
        "The current date and time in an explicit IANA time zone, read from the host clock " +
        "(a JavaScript tool).",
      inputSchema: JSON.stringify(INPUT_SCHEMA),
      payloadSchemas: [PAYLOAD_SCHEMA],
      claims: {
        capabilities: [{ name: "clock", scopes: ["UTC"] }],
        // Every budget field is option<u64> (e.g. fuel: 50_000_000 under QuickJS,
        // 50_000_000n under StarlingMonkey); left out, the host's default applies.
        budget: {},
      },
    };
  },

  call(argumentsJson) {
    const args = JSON.parse(argumentsJson);
    const zone = args.zone.trim();
    if (zone === "") {
      throw toolError("missing-zone", 'a time zone is required, e.g. "UTC"; none is assumed');
    }

    let reading;
    try {
      reading = now(zone);
    } catch (e) {
      const err = e && e.payload !== undefined ? e.payload : undefined;
      if (err === undefined) throw e; // not a capability-error: let it trap
      if (err.tag === "invalid") {
        throw toolError("unknown-zone", `${JSON.stringify(zone)} is not a known IANA time zone`);
      }
      throw toolError("clock-unavailable", `${err.tag}: ${err.val}`);
    }

    const payload = {
      instant: reading.rfc3339,
      unix_seconds: Number(reading.unixSeconds), // BigInt -> Number for JSON
      offset_seconds: reading.offsetSeconds,
      zone: reading.zone,
      observed_at: reading.rfc3339,
      max_age_seconds: 60,
    };
    const abs = Math.abs(reading.offsetSeconds);
    const offset = (reading.offsetSeconds < 0 ? "-" : "+") +
      String(Math.trunc(abs / 3600)).padStart(2, "0") + ":" +
      String(Math.trunc((abs % 3600) / 60)).padStart(2, "0");

    return {
      payload: { schema: PAYLOAD_SCHEMA, json: JSON.stringify(payload) },
      markdown: `It is **${reading.rfc3339}** in ${reading.zone} (UTC${offset}).`,
      evidence: [
        {
          id: "reading",
          kind: "observed",
          supports: ["/instant", "/unix_seconds", "/offset_seconds", "/zone", "/observed_at"],
          receipt: reading.receipt, // the host's receipt id for this reading
          digest: undefined,
          derivedFrom: [],
          note: "host clock reading",
        },
      ],
      attachments: [],
    };
  },
};
