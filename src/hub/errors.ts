/**
 * One-line messages for the Hub's error answers (401, 403, 404 with its
 * `X-Error-Code`), naming what to do.
 *
 * @module
 */

/** A failure talking to the Hub, with the HTTP status when there was one. */
export class HubError extends Error {
  /** The HTTP status, or 0 for a network failure. */
  readonly status: number;
  /** A download cut short: its `.incomplete` file is kept, and a retry resumes it. */
  readonly resumable: boolean;
  constructor(message: string, status = 0, resumable = false) {
    super(message);
    this.name = "HubError";
    this.status = status;
    this.resumable = resumable;
  }
}

/** What the token situation is, for the messages. */
export interface TokenState {
  hasToken: boolean;
}

/**
 * The message for an error `response` while fetching `what` (a repository,
 * `ORG/REPO/FILE`): the Hub's own text (X-Error-Message or JSON `error`) is
 * appended when present.
 */
export async function hubErrorFor(
  response: Response,
  repo: string,
  what: string,
  token: TokenState,
): Promise<HubError> {
  const code = response.headers.get("x-error-code") ?? "";
  let detail = response.headers.get("x-error-message") ?? "";
  try {
    const text = (await response.text()).slice(0, 2000);
    if (!detail) {
      try {
        const json = JSON.parse(text);
        if (json && typeof json.error === "string") detail = json.error;
      } catch {
        // not JSON
      }
    }
  } catch {
    // no body
  }
  detail = detail.replace(/\s+/g, " ").trim().slice(0, 200);
  const suffix = detail ? ` (the Hub says: ${detail})` : "";
  const status = response.status;
  const tokenHint = token.hasToken
    ? "the access token given was not accepted for it"
    : "if it is private or gated, set HF_TOKEN or give an access token";
  let message: string;
  if (status === 401) {
    message = code === "RepoNotFound" || !token.hasToken
      ? `${repo}: 401 Unauthorized: the repository does not exist, or it is private or gated; ${tokenHint}`
      : `${repo}: 401 Unauthorized: ${tokenHint}`;
  } else if (status === 403) {
    message = code === "GatedRepo" || /gated/i.test(detail)
      ? `${repo}: 403 Forbidden: the repository is gated: accept its terms on its Hub page, then use an access token of that account`
      : `${repo}: 403 Forbidden: ${
        token.hasToken
          ? "the token has no read access to it"
          : "set HF_TOKEN or give an access token that can read it"
      }`;
  } else if (status === 404) {
    if (code === "EntryNotFound") message = `${what}: 404 Not Found: no such file in ${repo}`;
    else if (code === "RevisionNotFound") {
      message = `${what}: 404 Not Found: no such revision in ${repo}`;
    } else message = `${what}: 404 Not Found on the Hub`;
  } else {
    message = `${what}: the Hub answered ${status} ${response.statusText}`.trimEnd();
  }
  return new HubError(message + suffix, status);
}
