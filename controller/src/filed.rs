//! Objects filed under a key taken from them (controller-runtime's field index), kept from the
//! watch events that feed a cache, so that a reconcile or an admission request reads the
//! objects of its key and never scans the whole cache.

use std::collections::{BTreeMap, HashMap};
use std::sync::RwLock;

use kube::ResourceExt;
use kube::runtime::watcher;
use tokio::sync::watch;

/// A pair of names: an object's (namespace, name), or the key it is filed under.
pub type Key = (String, String);

struct Inner<V> {
    /// Objects by the key they are filed under: (namespace, name) and the value kept of each.
    by_key: HashMap<Key, BTreeMap<Key, V>>,
    /// The key each object is filed under, by (namespace, name).
    key_of: HashMap<Key, Key>,
    /// Entries of a relist, swapped in when it is complete.
    relist: Option<Vec<(Key, Key, V)>>,
}

impl<V> Default for Inner<V> {
    fn default() -> Self {
        Inner { by_key: HashMap::new(), key_of: HashMap::new(), relist: None }
    }
}

impl<V> Inner<V> {
    fn remove(&mut self, object: &Key) {
        if let Some(key) = self.key_of.remove(object)
            && let Some(entries) = self.by_key.get_mut(&key)
        {
            entries.remove(object);
            if entries.is_empty() {
                self.by_key.remove(&key);
            }
        }
    }

    fn insert(&mut self, object: Key, key: Option<Key>, value: V) {
        self.remove(&object);
        if let Some(key) = key {
            self.by_key.entry(key.clone()).or_default().insert(object.clone(), value);
            self.key_of.insert(object, key);
        }
    }
}

/// Objects of kind `K` filed by `key` (none when it gives `None`), each with a value taken
/// from it (`()` where the objects live in a store, the part needed where only that is kept).
pub struct Filed<K, V> {
    key: fn(&K) -> Option<Key>,
    extract: fn(&K) -> V,
    inner: RwLock<Inner<V>>,
    ready: watch::Sender<bool>,
}

fn object_key<K: kube::Resource>(object: &K) -> Key {
    (object.namespace().unwrap_or_default(), object.name_any())
}

impl<K: kube::Resource, V: Clone> Filed<K, V> {
    pub fn new(key: fn(&K) -> Option<Key>, extract: fn(&K) -> V) -> Filed<K, V> {
        Filed { key, extract, inner: RwLock::default(), ready: watch::Sender::new(false) }
    }

    /// Files one watch event.
    pub fn apply(&self, event: &watcher::Event<K>) {
        let mut inner = self.inner.write().expect("not poisoned");
        match event {
            watcher::Event::Apply(o) => inner.insert(object_key(o), (self.key)(o), (self.extract)(o)),
            watcher::Event::Delete(o) => inner.remove(&object_key(o)),
            watcher::Event::Init => inner.relist = Some(Vec::new()),
            watcher::Event::InitApply(o) => {
                if let Some(key) = (self.key)(o) {
                    let entry = (object_key(o), key, (self.extract)(o));
                    inner.relist.get_or_insert_default().push(entry)
                }
            }
            watcher::Event::InitDone => {
                let listed = inner.relist.take().unwrap_or_default();
                inner.by_key.clear();
                inner.key_of.clear();
                for (object, key, value) in listed {
                    inner.insert(object, Some(key), value);
                }
                drop(inner);
                self.ready.send_replace(true);
            }
        }
    }

    /// The objects filed under `key`: (namespace, name) and value, in that order.
    pub fn get(&self, key: &Key) -> Vec<(Key, V)> {
        let inner = self.inner.read().expect("not poisoned");
        inner
            .by_key
            .get(key)
            .map(|m| m.iter().map(|(n, v)| (n.clone(), v.clone())).collect())
            .unwrap_or_default()
    }

    /// How many keys hold objects (for tests: an emptied key is gone).
    pub fn keys(&self) -> usize {
        self.inner.read().expect("not poisoned").by_key.len()
    }

    /// Waits until the first listing is filed.
    pub async fn wait_until_ready(&self) {
        let _ = self.ready.subscribe().wait_for(|r| *r).await;
    }
}

/// Set once a watch's first listing is complete. Any number of tasks may wait on it: a
/// store's own readiness wakes one waiter only, and the store's controller is that one.
#[derive(Clone, Default)]
pub struct Listed(std::sync::Arc<watch::Sender<bool>>);

impl Listed {
    /// Notes a watch event: the end of the first listing makes it ready.
    pub fn see<K>(&self, event: &watcher::Event<K>) {
        if matches!(event, watcher::Event::InitDone) {
            self.0.send_replace(true);
        }
    }

    /// Waits until the first listing is complete.
    pub async fn wait(&self) {
        let _ = self.0.subscribe().wait_for(|listed| *listed).await;
    }
}

/// The objects of a store, filed under several keys at once (one index per key function):
/// each index holds the store's own objects (the `Arc` the store holds, taken once the watch
/// event reached it), so a reconcile reads the objects of its key without a lookup of each in
/// the store, and every object is held once.
pub struct Indexed<K: kube::Resource<DynamicType = ()> + Clone + 'static> {
    store: kube::runtime::reflector::Store<K>,
    keys: Vec<fn(&K) -> Option<Key>>,
    inner: RwLock<IndexedInner<K>>,
    ready: watch::Sender<bool>,
}

struct IndexedInner<K> {
    /// Per index: the objects by the key they are filed under, by (namespace, name).
    by_key: Vec<HashMap<Key, BTreeMap<Key, std::sync::Arc<K>>>>,
    /// Per object: the key of each index it is filed under.
    keys_of: HashMap<Key, Vec<Option<Key>>>,
    /// The objects of a relist and their keys, filed when it is complete.
    relist: Option<Vec<(Key, Vec<Option<Key>>)>>,
}

impl<K> IndexedInner<K> {
    fn remove(&mut self, object: &Key) {
        let Some(keys) = self.keys_of.remove(object) else { return };
        for (index, key) in keys.into_iter().enumerate() {
            if let Some(key) = key
                && let Some(entries) = self.by_key[index].get_mut(&key)
            {
                entries.remove(object);
                if entries.is_empty() {
                    self.by_key[index].remove(&key);
                }
            }
        }
    }

    fn insert(&mut self, object: Key, keys: Vec<Option<Key>>, shared: std::sync::Arc<K>) {
        self.remove(&object);
        for (index, key) in keys.iter().enumerate() {
            if let Some(key) = key {
                self.by_key[index].entry(key.clone()).or_default().insert(object.clone(), shared.clone());
            }
        }
        self.keys_of.insert(object, keys);
    }
}

impl<K: kube::Resource<DynamicType = ()> + Clone + 'static> Indexed<K> {
    /// Indexes over the objects of `store` (filled by the same watch, before each event
    /// reaches [`Indexed::apply`]), one per key function.
    pub fn new(store: kube::runtime::reflector::Store<K>, keys: &[fn(&K) -> Option<Key>]) -> Indexed<K> {
        let inner = IndexedInner {
            by_key: keys.iter().map(|_| HashMap::new()).collect(),
            keys_of: HashMap::new(),
            relist: None,
        };
        Indexed { store, keys: keys.to_vec(), inner: RwLock::new(inner), ready: watch::Sender::new(false) }
    }

    fn keys_of(&self, object: &K) -> Vec<Option<Key>> {
        self.keys.iter().map(|key| key(object)).collect()
    }

    /// Files one watch event in every index, after the store applied it.
    pub fn apply(&self, event: &watcher::Event<K>) {
        let mut inner = self.inner.write().expect("not poisoned");
        match event {
            watcher::Event::Apply(o) => {
                let (ns, name) = object_key(o);
                if let Some(shared) = self.object(&ns, &name) {
                    inner.insert((ns, name), self.keys_of(o), shared);
                }
            }
            watcher::Event::Delete(o) => inner.remove(&object_key(o)),
            watcher::Event::Init => inner.relist = Some(Vec::new()),
            watcher::Event::InitApply(o) => {
                let entry = (object_key(o), self.keys_of(o));
                inner.relist.get_or_insert_default().push(entry);
            }
            watcher::Event::InitDone => {
                let listed = inner.relist.take().unwrap_or_default();
                inner.by_key.iter_mut().for_each(HashMap::clear);
                inner.keys_of.clear();
                for ((ns, name), keys) in listed {
                    if let Some(shared) = self.object(&ns, &name) {
                        inner.insert((ns, name), keys, shared);
                    }
                }
                drop(inner);
                self.ready.send_replace(true);
            }
        }
    }

    /// The objects that index `index` files under `key`.
    pub fn get(&self, index: usize, key: &Key) -> Vec<std::sync::Arc<K>> {
        let inner = self.inner.read().expect("not poisoned");
        inner.by_key[index].get(key).map(|m| m.values().cloned().collect()).unwrap_or_default()
    }

    /// The object `namespace/name`, from the store.
    pub fn object(&self, namespace: &str, name: &str) -> Option<std::sync::Arc<K>> {
        self.store.get(&kube::runtime::reflector::ObjectRef::new(name).within(namespace))
    }

    /// How many keys of index `index` hold objects.
    pub fn keys(&self, index: usize) -> usize {
        self.inner.read().expect("not poisoned").by_key[index].len()
    }

    /// Waits until the indexes hold the first listing (filed after the store has it).
    pub async fn wait_until_ready(&self) {
        let _ = self.ready.subscribe().wait_for(|r| *r).await;
    }
}
