// Kubernetes objects checked as an API server checks them (CONTRACT §25), offline: the OpenAPI
// schemas of the API, compiled by kubernetes-models, and strict field validation (what
// `kubectl apply` asks for since 1.27: a misspelt field, `readinessprobe`, is refused, not
// ignored). The compiled schemas only read the fields they know, so a field none of them read
// is one the API does not have: the object is validated through a proxy that records the reads.
import type { K8sObject } from './kustomize.js';

type Validate = ((data: unknown) => boolean) & { errors?: Array<{ instancePath: string; message?: string; keyword: string; params: unknown }> | null };

/** The kubernetes-models schema of an apiVersion and kind: IoK8sApiAppsV1Deployment, IoK8sApiCoreV1ConfigMap. */
function schemaName({ apiVersion, kind }: K8sObject): string {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') as [string, string] : ['core', apiVersion];
  const title = (word: string) => word.charAt(0).toUpperCase() + word.slice(1);
  return `IoK8sApi${title(group.split('.')[0]!)}${title(version)}${kind}`;
}

/** `value` behind proxies that record, per path, the fields read and the objects whose keys were listed. */
function watched(value: unknown, at: string, reads: Map<string, Set<string>>, listed: Set<string>): unknown {
  if (typeof value !== 'object' || value === null) return value;
  return new Proxy(value, {
    get(target, key, receiver) {
      if (typeof key !== 'string') return Reflect.get(target, key, receiver) as unknown;
      if (!reads.has(at)) reads.set(at, new Set());
      reads.get(at)!.add(key);
      return watched(Reflect.get(target, key, receiver), `${at}/${key}`, reads, listed);
    },
    ownKeys(target) {
      listed.add(at);
      return Reflect.ownKeys(target);
    },
  });
}

/** The fields of `value` that no schema read: `/spec/template/spec/containers/0/readinessprobe`. */
function unread(value: unknown, at: string, reads: Map<string, Set<string>>, listed: Set<string>): string[] {
  if (typeof value !== 'object' || value === null || listed.has(at)) return [];
  return Object.entries(value).flatMap(([key, child]) =>
    reads.get(at)?.has(key) ? unread(child, `${at}/${key}`, reads, listed) : [`${at}/${key}`]);
}

/** What the API would refuse in `object`: schema errors (`/spec/replicas: must be integer`) and unknown fields. */
export async function apiProblems(object: K8sObject): Promise<string[]> {
  const { validate } = await import(`kubernetes-models/_schemas/${schemaName(object)}`) as { validate: Validate };
  const reads = new Map<string, Set<string>>();
  const listed = new Set<string>();
  const valid = validate(watched(object, '', reads, listed));
  const errors = valid ? [] : (validate.errors ?? []).map((e) => `${e.instancePath || '/'}: ${e.message ?? `${e.keyword} ${JSON.stringify(e.params)}`}`);
  return [...errors, ...unread(object, '', reads, listed).map((field) => `${field}: unknown field`)];
}
