// What the operators' listings (users, organizations) share: WHERE conditions numbered as they are
// added, and a search text matched literally anywhere in a column.

/** Conditions and their parameters ($1, $2, …), in the order they were added. */
export class Conditions {
  readonly params: unknown[] = [];
  private readonly where: string[] = [];

  /** A parameter's placeholder, once its value is kept. */
  param(value: unknown): string {
    this.params.push(value);
    return `$${this.params.length}`;
  }

  /** A condition on one new parameter. */
  add(condition: (placeholder: string) => string, value: unknown): void {
    this.where.push(condition(this.param(value)));
  }

  /** A condition with its placeholders already taken (param()). */
  push(condition: string): void {
    this.where.push(condition);
  }

  /** `WHERE … AND …`, or nothing. */
  get clause(): string {
    return this.where.length ? `WHERE ${this.where.join(' AND ')}` : '';
  }
}

/** A LIKE pattern matching `text` anywhere, in lower case: LIKE's own characters in it are literal (an operator searching "a_b" means that). */
export const containsPattern = (text: string): string => `%${text.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
