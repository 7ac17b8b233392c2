// A deadline for work that has none of its own (a getaddrinfo call, a health probe).

/** `work`'s outcome, or a rejection with `message` once `ms` have passed; the timer never outlives it. */
export function withTimeout<T>(work: Promise<T>, ms: number, message = 'timeout'): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([work, new Promise<T>((_, reject) => { timer = setTimeout(() => reject(new Error(message)), ms); })])
    .finally(() => clearTimeout(timer));
}
