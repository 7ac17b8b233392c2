// The part of kustomize that deploy/kubernetes uses (CONTRACT §25, §28), for machines without a
// kustomize binary: `resources` (files of YAML documents, and directories: another kustomization,
// a base), `configMapGenerator` (`files`, `options.labels`), with kustomize's content-hash suffix
// and the rename of the ConfigMap in the pod templates that mount or read it, and `images`
// (`newName`, `newTag` of the pod templates' containers). A kustomization using anything else is refused, not half-rendered: the base
// stays within what a plain `kubectl apply -k` renders the same way (test/ship/kubernetes.test.ts
// compares the two where kubectl is installed).
import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parse, parseAllDocuments } from 'yaml';

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; [key: string]: unknown };
  [key: string]: unknown;
}

const SUPPORTED = new Set(['apiVersion', 'kind', 'resources', 'configMapGenerator', 'images']);

/**
 * kustomize's name suffix of a generated ConfigMap (sigs.k8s.io/kustomize/api/hasher): the first 10
 * hex digits of the SHA-256 of Go's JSON of {data, kind, name} (keys sorted, <>& escaped), with
 * the digits and letters that could spell words replaced. The name is always "" there (v5 looks
 * up "metadata/name" as one key and finds nothing), so two generators of the same data get one suffix.
 */
export function configMapHash(data: Record<string, string>): string {
  const sorted = Object.fromEntries(Object.entries(data).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  const json = JSON.stringify({ data: sorted, kind: 'ConfigMap', name: '' })
    .replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  const swap: Record<string, string> = { 0: 'g', 1: 'h', 3: 'k', a: 'm', e: 't' };
  return [...createHash('sha256').update(json).digest('hex').slice(0, 10)].map((c) => swap[c] ?? c).join('');
}

interface Generator { name: string; files: string[]; options?: { labels?: Record<string, string> } }

/** The ConfigMap a configMapGenerator entry makes (`files`: `key=path` or `path`, keyed by its base name; `options.labels`). */
function generate(dir: string, { name, files, options = {}, ...rest }: Generator): K8sObject {
  const unsupported = [...Object.keys(rest), ...Object.keys(options).filter((key) => key !== 'labels')];
  if (unsupported.length) throw new Error(`configMapGenerator ${name}: ${unsupported.join(', ')} not rendered by test/helpers/kustomize.ts`);
  const data: Record<string, string> = {};
  for (const entry of files) {
    const [key, file] = entry.includes('=') ? entry.split('=', 2) as [string, string] : [path.basename(entry), entry];
    data[key] = readFileSync(path.join(dir, file), 'utf8');
  }
  const metadata = { name: `${name}-${configMapHash(data)}`, ...(options.labels ? { labels: options.labels } : {}) };
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata, data };
}

type PodSpec = {
  volumes?: Array<{ configMap?: { name: string } }>;
  containers?: Array<{ envFrom?: Array<{ configMapRef?: { name: string } }>; env?: Array<{ valueFrom?: { configMapKeyRef?: { name: string } } }> }>;
};

/** Renames a ConfigMap where a pod template names it (kustomize's nameReference for ConfigMaps, the fields used here). */
function renameConfigMap(object: K8sObject, from: string, to: string): void {
  const spec = (object.spec as { template?: { spec?: PodSpec } } | undefined)?.template?.spec;
  if (!spec) return;
  const rename = (ref: { name: string } | undefined) => { if (ref?.name === from) ref.name = to; };
  for (const volume of spec.volumes ?? []) rename(volume.configMap);
  for (const container of spec.containers ?? []) {
    for (const source of container.envFrom ?? []) rename(source.configMapRef);
    for (const variable of container.env ?? []) rename(variable.valueFrom?.configMapKeyRef);
  }
}

interface Image { name: string; newName?: string; newTag?: string }

/** kustomize's images transformer on the pod templates' containers: an image named `name` (any tag) becomes newName:newTag. */
function setImages(object: K8sObject, images: Image[]): void {
  const spec = (object.spec as { template?: { spec?: { containers?: Array<{ image: string }>; initContainers?: Array<{ image: string }> } } } | undefined)?.template?.spec;
  for (const container of [...(spec?.containers ?? []), ...(spec?.initContainers ?? [])]) {
    const [name, tag] = container.image.split(/:(?=[^/]*$)/) as [string, string | undefined];
    const image = images.find((i) => i.name === name);
    if (image) container.image = `${image.newName ?? name}${image.newTag ?? tag ? `:${image.newTag ?? tag}` : ''}`;
  }
}

/** The objects `kustomize build DIR` gives for a kustomization within the subset above, generated ConfigMaps first. */
export function kustomizeBuild(dir: string): K8sObject[] {
  const kustomization = parse(readFileSync(path.join(dir, 'kustomization.yaml'), 'utf8')) as Record<string, unknown>;
  const unsupported = Object.keys(kustomization).filter((key) => !SUPPORTED.has(key));
  if (unsupported.length) throw new Error(`${dir}/kustomization.yaml: ${unsupported.join(', ')} not rendered by test/helpers/kustomize.ts`);
  const objects = ((kustomization.resources ?? []) as string[]).flatMap((entry) => {
    const at = path.join(dir, entry);
    if (statSync(at).isDirectory()) return kustomizeBuild(at);
    return parseAllDocuments(readFileSync(at, 'utf8')).map((doc) => doc.toJS() as K8sObject).filter(Boolean);
  });
  const generated = ((kustomization.configMapGenerator ?? []) as Generator[]).map((generator) => {
    const configMap = generate(dir, generator);
    for (const object of objects) renameConfigMap(object, generator.name, configMap.metadata.name);
    return configMap;
  });
  for (const object of objects) setImages(object, (kustomization.images ?? []) as Image[]);
  return [...generated, ...objects];
}
