// The fake GitHub of the tests is the demo's (src/demo/githubFake.ts); here, the browser at it.
export { startGitHubFake, type GitHubAnswer, type GitHubEmail, type GitHubFake, type GitHubUser } from '../../src/demo/githubFake.js';

/** The browser at GitHub: `login` approves the gateway; the callback URL GitHub sends the browser back to. */
export async function approveAtGitHub(authorizeUrl: string, login: string): Promise<URL> {
  const url = new URL(authorizeUrl);
  url.searchParams.set('login', login);
  const res = await fetch(url, { redirect: 'manual' });
  if (res.status !== 302) throw new Error(`the fake GitHub answered ${res.status}: ${await res.text()}`);
  return new URL(res.headers.get('location')!);
}
