// The math env's expression grammar, checked and evaluated exactly (the proposer env validates a
// proposed task with it): integers, + - *, parentheses, spaces.
//
//   expr := term (("+" | "-") term)*      term := atom ("*" atom)*      atom := INT | "(" expr ")"
//
// A proposal is valid when it parses whole, its integers have at most `maxDigits` digits, it has
// 1 to `maxOps` operations, and its value is a safe integer.

export interface Checked {
  value: number;
  ops: number;
}

/** The value and operation count of `text`, or the reason it is not a valid expression. */
export function checkExpression(text: string, maxDigits: number, maxOps: number): Checked | { error: string } {
  const tokens = text.match(/\d+|[-+*()]|\S/g) ?? [];
  let at = 0;
  let ops = 0;
  const fail = (why: string): never => {
    throw new Error(why);
  };
  const atom = (): number => {
    const token = tokens[at++];
    if (token === "(") {
      const value = expr();
      if (tokens[at++] !== ")") fail("a parenthesis is not closed");
      return value;
    }
    if (token === undefined || !/^\d+$/.test(token)) fail(`expected a number, found ${token ?? "the end"}`);
    if (token!.length > maxDigits) fail(`${token} has more than ${maxDigits} digits`);
    return Number(token);
  };
  const term = (): number => {
    let value = atom();
    while (tokens[at] === "*") {
      at++;
      ops++;
      value *= atom();
    }
    return value;
  };
  const expr = (): number => {
    let value = term();
    while (tokens[at] === "+" || tokens[at] === "-") {
      const op = tokens[at++];
      ops++;
      value = op === "+" ? value + term() : value - term();
    }
    return value;
  };
  try {
    if (tokens.length === 0) return { error: "empty" };
    const value = expr();
    if (at !== tokens.length) fail(`unexpected ${tokens[at]}`);
    if (ops === 0 || ops > maxOps) fail(`${ops} operations (1 to ${maxOps} allowed)`);
    if (!Number.isSafeInteger(value)) fail("the value is not a safe integer");
    return { value, ops };
  } catch (err) {
    return { error: (err as Error).message };
  }
}
