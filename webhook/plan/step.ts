// What the planner's steps share. Each step takes plain data and returns its result or a Stop:
// a Denial (plan() refuses the pod) or a Skip (plan() allows it unchanged). No step does I/O.

export type Obj = Record<string, unknown>;
export const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
export const strMap = (v: unknown): Record<string, string> => {
  if (!isObj(v)) return {};
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(v)) if (typeof x === 'string') out[k] = x;
  return out;
};

export interface ContainerLike extends Obj {
  name?: unknown;
  ports?: unknown;
  lifecycle?: unknown;
}

/** The pod is refused: plan() answers 400 with this message (and the profile, once it is known). */
export interface Denial {
  denied: string;
}
/** The pod is left as it is: plan() allows it with this outcome (a metrics label) and these warnings. */
export interface Skip {
  skip: string;
  warnings?: string[];
}
export type Stop = Denial | Skip;
/** A step's answer: its result, or where plan() stops. */
export type Step<T> = T | Stop;

export const denial = (message: string): Denial => ({ denied: message });
export const skip = (outcome: string, warnings?: string[]): Skip =>
  warnings ? { skip: outcome, warnings } : { skip: outcome };
export const isStop = (r: unknown): r is Stop => isObj(r) && ('denied' in r || 'skip' in r);
